//! Record threads yield the CPU to the request path.
//!
//! Recording is background work: an exchange's record may land milliseconds later, but a guest
//! request should not wait behind a record batch. The recorder's writer thread therefore runs
//! below the threads that serve requests, in two steps:
//!
//! * **Keeping up:** Linux's idle scheduling class (`SCHED_IDLE`): the thread runs only on a
//!   core nothing else wants, and any request-path thread that wakes takes the core at once.
//! * **Falling behind** (a full batch waiting, or someone waiting on a flush or close): back to
//!   the normal class at nice +10, so a machine kept busy by other work cannot starve records
//!   (the bounded queue would then hold producers back for as long as it is starved). The next
//!   batch that does not fill up returns it to the idle class.
//!
//! Leaving the idle class needs privilege (`CAP_SYS_NICE`) or an `RLIMIT_NICE` that allows the
//! thread's nice value; an ordinary user has neither by default. A thread that could not leave
//! it again must never enter it, so the first use tries the round trip on a throw-away thread
//! ([`idle_class_is_reversible`]); where it fails, record threads stay in the normal class at
//! nice +10 throughout.
//!
//! Measured with `switchyard bench gateway` (records on minus off, p99 added at concurrency 1,
//! unary / stream, 2 runs each): nice +10 alone +497 / +23 and +391 / +364 µs; idle class while
//! keeping up −38 / +65 and +334 / +168 µs; the throughput ratios within noise of each other.
//! Earlier, nice +10 against no change: +202 … +626 against +680 … +988 µs (unary, 4 runs); the
//! batch a record thread runs after lingering is what the slowest requests had waited for.

/// Nice increment for record threads.
pub const RECORD_THREAD_NICE: i32 = 10;

/// Lowers the calling thread's scheduling priority by [`RECORD_THREAD_NICE`] (on Linux the nice
/// value belongs to the thread) and, where that can be undone ([`idle_class_is_reversible`]),
/// puts it in the idle class ([`set_this_thread_behind`] with `false`). Best effort: where that
/// is not possible nothing changes.
pub fn lower_this_threads_priority() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `nice` has no memory effects; it only changes the calling thread's nice value
        // (a failure, e.g. a sandbox refusing it, leaves the priority as it was).
        let _ = unsafe { libc::nice(RECORD_THREAD_NICE) };
    }
    set_this_thread_behind(false);
}

/// Moves the calling record thread to the normal scheduling class (at its nice value) while it
/// is `behind`, else to the idle class; does nothing where the idle class could not be left
/// again ([`idle_class_is_reversible`]). Best effort, as [`lower_this_threads_priority`].
pub fn set_this_thread_behind(behind: bool) {
    #[cfg(target_os = "linux")]
    if idle_class_is_reversible() {
        let policy = if behind {
            libc::SCHED_OTHER
        } else {
            libc::SCHED_IDLE
        };
        // Moving between the two fair-share classes keeps the nice value.
        let _ = set_this_threads_policy(policy);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = behind;
}

/// True when a record thread at nice +[`RECORD_THREAD_NICE`] may enter the idle class and leave
/// it again. Found out once per process, on a throw-away thread (whose scheduling then does not
/// matter).
pub fn idle_class_is_reversible() -> bool {
    static REVERSIBLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *REVERSIBLE.get_or_init(|| {
        #[cfg(target_os = "linux")]
        {
            std::thread::Builder::new()
                .name("switchyard-sched-probe".into())
                .spawn(|| {
                    // SAFETY: as in `lower_this_threads_priority`.
                    let _ = unsafe { libc::nice(RECORD_THREAD_NICE) };
                    set_this_threads_policy(libc::SCHED_IDLE)
                        && set_this_threads_policy(libc::SCHED_OTHER)
                })
                .ok()
                .and_then(|probe| probe.join().ok())
                .unwrap_or(false)
        }
        #[cfg(not(target_os = "linux"))]
        false
    })
}

/// Sets the calling thread's scheduling policy (priority 0); true when the kernel accepted it.
#[cfg(target_os = "linux")]
fn set_this_threads_policy(policy: libc::c_int) -> bool {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid `sched_param` for the call's duration; pid 0 is the calling
    // thread. A refusal leaves the policy as it was.
    unsafe { libc::sched_setscheduler(0, policy, &param) == 0 }
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

    /// The calling thread's scheduling policy.
    fn this_threads_policy() -> i32 {
        // SAFETY: plain syscall without memory arguments (pid 0: the calling thread).
        unsafe { libc::sched_getscheduler(0) }
    }

    #[test]
    fn only_the_calling_thread_is_lowered() {
        let before = (this_threads_nice(), this_threads_policy());
        let lowered = std::thread::spawn(move || {
            let start = this_threads_nice();
            lower_this_threads_priority();
            (start, this_threads_nice(), this_threads_policy())
        })
        .join()
        .unwrap();
        assert_eq!(lowered.1, (lowered.0 + RECORD_THREAD_NICE).min(19));
        let expected = if idle_class_is_reversible() {
            libc::SCHED_IDLE
        } else {
            libc::SCHED_OTHER
        };
        assert_eq!(lowered.2, expected);
        assert_eq!(
            (this_threads_nice(), this_threads_policy()),
            before,
            "other threads keep their priority"
        );
    }

    #[test]
    fn a_thread_behind_runs_in_the_normal_class_at_its_nice_value_and_back() {
        let (behind, caught_up) = std::thread::spawn(|| {
            lower_this_threads_priority();
            set_this_thread_behind(true);
            let behind = (this_threads_policy(), this_threads_nice());
            set_this_thread_behind(false);
            (behind, this_threads_policy())
        })
        .join()
        .unwrap();
        assert_eq!(behind.0, libc::SCHED_OTHER);
        assert!(
            behind.1 >= RECORD_THREAD_NICE.min(19),
            "nice kept: {}",
            behind.1
        );
        if idle_class_is_reversible() {
            assert_eq!(caught_up, libc::SCHED_IDLE);
        } else {
            assert_eq!(
                caught_up,
                libc::SCHED_OTHER,
                "never enters a class it cannot leave"
            );
        }
    }
}
