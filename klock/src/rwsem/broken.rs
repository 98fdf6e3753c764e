/// The read fast path ignores `WRITER_LOCKED`.
pub const READ_IGNORES_WRITER: u8 = 1;
/// A reader wake-up grants only the first queued reader.
pub const GRANT_ONE_READER: u8 = 2;
/// Write trylocks ignore `HANDOFF`.
pub const IGNORE_HANDOFF: u8 = 3;
/// A write unlock with readers queued at the front releases the lock
/// first and grants them afterwards (wakes them to a free lock): a
/// barging writer can take it in between.
pub const WAKE_WITHOUT_GRANT: u8 = 4;
/// A write unlock never grants readers queued behind a writer at the
/// front, however long they waited.
pub const NO_READER_BOUND: u8 = 5;
/// A reader taking the lock past the queue (a steal in `STEAL` mode, or
/// reader passing) ignores `HANDOFF`.
pub const PAST_QUEUE_IGNORES_HANDOFF: u8 = 6;
/// A wake-up of readers to compete unlinks them but neither marks nor
/// wakes them (a lost wake-up: they wait off the list for ever).
pub const COMPETE_NO_WAKE: u8 = 7;
/// A reader woken to compete takes the lock without looking at it
/// (as if it had been granted).
pub const COMPETE_AS_GRANT: u8 = 8;
/// A woken writer never clears `WRITER_WOKEN`: once woken, unlocks
/// stop waking it (a lost wake-up).
pub const WOKEN_NEVER_CLEARED: u8 = 9;
/// A reader taking the lock past the queue ignores `WRITER_LOCKED`.
pub const PAST_QUEUE_IGNORES_WRITER: u8 = 10;
/// The quick spin's reader keeps its probe whatever the probe found,
/// trusting the poll that showed no writer (a writer can take the lock
/// between the poll and the probe).
pub const QUICK_TRUSTS_POLL: u8 = 11;
/// `FRONT_READER` is never set (a reader queueing first sets only
/// `WAITERS`, and the front's upkeep under `wait_lock` never sets it): a
/// write unlock then releases the lock with a reader at the front, and a
/// barging writer can take it before that reader.
pub const NO_FRONT_READER: u8 = 12;
