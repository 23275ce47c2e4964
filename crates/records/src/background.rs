//! Record threads yield the CPU to the request path.
//!
//! Recording is background work: an exchange's record may land milliseconds later, but a guest
//! request should not wait behind a record batch. The recorder's writer thread therefore runs at
//! a lower scheduling priority (nice +10) than the threads that serve requests: when a request
//! and a record batch want a core at the same moment, the request gets it. The writer still gets
//! every idle cycle, and under full load the bounded queues make producers wait for it instead
//! of dropping anything.
//!
//! Measured (when the gateway still had a record thread of its own next to the recorder's) with
//! `switchyard bench gateway --latency-requests 8000` (records on minus off, p99
//! at concurrency 1): without it +680 … +988 µs, with it +202 … +626 µs over 4 runs; the batch a
//! record thread runs after lingering is what the slowest requests had waited for. At full load
//! the same work is done in another order: in 3 alternating runs the records-on/off CPU per
//! request was 1.39–1.63 with it and 1.34–1.62 without (the throughput ratio 0–3 points lower,
//! within this machine's noise).

/// Nice increment for record threads.
pub const RECORD_THREAD_NICE: i32 = 10;

/// Lowers the calling thread's scheduling priority by [`RECORD_THREAD_NICE`] (on Linux the nice
/// value belongs to the thread). Best effort: where that is not possible nothing changes.
pub fn lower_this_threads_priority() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `nice` has no memory effects; it only changes the calling thread's nice value
        // (a failure, e.g. a sandbox refusing it, leaves the priority as it was).
        let _ = unsafe { libc::nice(RECORD_THREAD_NICE) };
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// The calling thread's nice value.
    fn this_threads_nice() -> i32 {
        // SAFETY: plain syscalls without memory arguments.
        unsafe {
            let tid = libc::gettid() as libc::id_t;
            libc::getpriority(libc::PRIO_PROCESS, tid)
        }
    }

    #[test]
    fn only_the_calling_thread_is_lowered() {
        let before = this_threads_nice();
        let lowered = std::thread::spawn(move || {
            let start = this_threads_nice();
            lower_this_threads_priority();
            (start, this_threads_nice())
        })
        .join()
        .unwrap();
        assert_eq!(lowered.1, (lowered.0 + RECORD_THREAD_NICE).min(19));
        assert_eq!(
            this_threads_nice(),
            before,
            "other threads keep their priority"
        );
    }
}
