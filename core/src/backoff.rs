//! [`wait_by_query`]: a timed host wait on a completion the runtime can only be asked
//! about (HIP has no timed event wait; older ACL runtimes have none either).

use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// The first pause of a [`wait_by_query`].
pub const FIRST_PAUSE: Duration = Duration::from_micros(5);
/// The longest pause of a [`wait_by_query`]: how late past completion it may notice.
pub const LONGEST_PAUSE: Duration = Duration::from_millis(1);

/// Asks `done` until it says `true` or `timeout` has passed ([`Error::Timeout`] naming
/// `what()`, with the time measured), pausing between questions from [`FIRST_PAUSE`],
/// doubling up to [`LONGEST_PAUSE`]. An error of `done` ends the wait.
pub fn wait_by_query(
    timeout: Duration,
    what: impl FnOnce() -> String,
    mut done: impl FnMut() -> Result<bool>,
) -> Result<()> {
    let started = Instant::now();
    let mut pause = FIRST_PAUSE;
    loop {
        if done()? {
            return Ok(());
        }
        let waited = started.elapsed();
        if waited >= timeout {
            return Err(Error::timed_out(
                format!("{} (limit {timeout:?})", what()),
                started,
            ));
        }
        std::thread::sleep(pause.min(timeout - waited));
        pause = (pause * 2).min(LONGEST_PAUSE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn returns_once_done_and_times_out_otherwise() {
        let mut asked = 0;
        wait_by_query(Duration::from_secs(5), String::new, || {
            asked += 1;
            Ok(asked == 3)
        })
        .unwrap();
        assert_eq!(asked, 3);

        let e = wait_by_query(
            Duration::from_millis(20),
            || "the event".into(),
            || Ok(false),
        )
        .unwrap_err();
        let Error::Timeout { what, after } = &e else {
            panic!("{e:?}")
        };
        assert!(what.starts_with("the event (limit 20ms"), "{what}");
        assert!(*after >= Duration::from_millis(20), "{after:?}");

        let e = wait_by_query(Duration::from_secs(5), String::new, || {
            Err(Error::invalid_argument("gone"))
        })
        .unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { .. }), "{e:?}");
    }
}
