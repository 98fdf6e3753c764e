# A Python program whose threads pass items through queue.Queue (the GIL: a pthread mutex and condition variable); prints ok.
import threading, queue, sys
N = int(sys.argv[1]) if len(sys.argv) > 1 else 200000
q = queue.Queue()
def producer():
    for i in range(N):
        q.put(i)
    q.put(None)
def consumer(out):
    s = 0
    while True:
        x = q.get()
        if x is None:
            break
        s += x
    out.append(s)
out = []
ts = [threading.Thread(target=producer), threading.Thread(target=consumer, args=(out,))]
for t in ts: t.start()
for t in ts: t.join()
assert out[0] == N*(N-1)//2
print("ok")
