//! Keeping this process's memory, environment and command line from the programs it runs.
//!
//! A check's command or a model runner runs as the same operating-system user as verdict, so
//! by default it could read `/proc/PARENT/environ` (the token, the store URL) or attach to the
//! parent. A process that is not dumpable has those files owned by root and refuses ptrace
//! from its own user, so commands that run someone else's program turn it off first.

/// Makes this process non-dumpable (Linux); elsewhere there is no such `/proc` to close.
///
/// # Errors
/// The kernel's refusal, which the caller treats as a reason not to run anything.
pub fn deny() -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
            .map_err(std::io::Error::from)
    }
    #[cfg(not(target_os = "linux"))]
    {
        Ok(())
    }
}

/// Whether this process is dumpable (readable and traceable by its own user); `None` where the
/// question does not apply.
#[must_use]
pub fn dumpable() -> Option<bool> {
    #[cfg(target_os = "linux")]
    {
        rustix::process::dumpable_behavior()
            .ok()
            .map(|b| b != rustix::process::DumpableBehavior::NotDumpable)
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #[test]
    fn denying_turns_the_dumpable_flag_off() {
        assert_eq!(super::dumpable(), Some(true));
        super::deny().unwrap();
        assert_eq!(super::dumpable(), Some(false));
    }
}
