//! Fail mode and the connectivity events that drive it.
//!
//! The agent counts the controllers that have finished the HELLO exchange. When the count
//! leaves zero it reports [`Connectivity::Connected`]; when it has stayed at zero for the
//! fail-open delay (counted from start-up too) it reports [`Connectivity::Lost`]. A controller
//! that drops and comes back within the delay causes no event. What the bridge does with the
//! events is its fail mode: in `standalone` it switches to L2 learning on `Lost` and back to
//! the controller's flows on `Connected`; in `secure` it keeps its flows either way.
//!
//! The monitor is one task per bridge that sleeps on a watch channel and at most one timer.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use tokio::sync::watch;

/// What the bridge does while no controller is connected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FailMode {
    /// Keep the flow tables as the controller left them; forward nothing new.
    Secure,
    /// Act as an L2 learning switch until a controller connects (the default).
    #[default]
    Standalone,
}

impl FailMode {
    /// Whether the bridge should do L2 learning after `event`.
    pub fn learning_after(self, event: Connectivity) -> bool {
        self == FailMode::Standalone && event == Connectivity::Lost
    }
}

impl FromStr for FailMode {
    type Err = String;
    fn from_str(s: &str) -> Result<FailMode, String> {
        match s {
            "secure" => Ok(FailMode::Secure),
            "standalone" => Ok(FailMode::Standalone),
            other => Err(format!(
                "fail mode {other:?}: write \"secure\" or \"standalone\""
            )),
        }
    }
}

impl fmt::Display for FailMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FailMode::Secure => "secure",
            FailMode::Standalone => "standalone",
        })
    }
}

/// A change in whether the bridge has a controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connectivity {
    /// At least one controller is connected (after none, or at start-up).
    Connected,
    /// No controller has been connected for the fail-open delay.
    Lost,
}

/// Watches the count of connected controllers and calls `emit` on each change of
/// [`Connectivity`]; returns when the count's sender is dropped.
pub async fn monitor(
    mut connected: watch::Receiver<usize>,
    fail_open_delay: Duration,
    emit: impl Fn(Connectivity),
) {
    let mut reported: Option<Connectivity> = None;
    loop {
        let up = *connected.borrow_and_update() > 0;
        if up && reported != Some(Connectivity::Connected) {
            reported = Some(Connectivity::Connected);
            emit(Connectivity::Connected);
        }
        if up || reported == Some(Connectivity::Lost) {
            if connected.changed().await.is_err() {
                return;
            }
            continue;
        }
        tokio::select! {
            () = tokio::time::sleep(fail_open_delay) => {
                reported = Some(Connectivity::Lost);
                emit(Connectivity::Lost);
            }
            changed = connected.changed() => if changed.is_err() { return },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use tokio::time::{advance, Instant};

    type Log = Arc<Mutex<Vec<(Connectivity, Duration)>>>;

    fn start(delay: Duration) -> (watch::Sender<usize>, Log, tokio::task::JoinHandle<()>) {
        let (tx, rx) = watch::channel(0);
        let log: Log = Arc::default();
        let l = log.clone();
        let t0 = Instant::now();
        let task = tokio::spawn(monitor(rx, delay, move |c| {
            l.lock().unwrap().push((c, t0.elapsed()));
        }));
        (tx, log, task)
    }

    /// Lets the monitor task run to its next await.
    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn lost_after_delay_from_startup_then_connected() {
        let (tx, log, task) = start(Duration::from_secs(15));
        settle().await;
        advance(Duration::from_millis(14_999)).await;
        settle().await;
        assert!(log.lock().unwrap().is_empty(), "no event before the delay");
        advance(Duration::from_millis(1)).await;
        settle().await;
        assert_eq!(
            *log.lock().unwrap(),
            [(Connectivity::Lost, Duration::from_secs(15))]
        );
        advance(Duration::from_secs(5)).await;
        tx.send(1).unwrap();
        settle().await;
        assert_eq!(
            log.lock().unwrap()[1],
            (Connectivity::Connected, Duration::from_secs(20))
        );
        // A second controller changes nothing.
        tx.send(2).unwrap();
        settle().await;
        assert_eq!(log.lock().unwrap().len(), 2);
        drop(tx);
        task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn short_outage_is_not_reported() {
        let (tx, log, task) = start(Duration::from_secs(10));
        tx.send(1).unwrap();
        settle().await;
        tx.send(0).unwrap();
        settle().await;
        advance(Duration::from_secs(9)).await;
        tx.send(1).unwrap();
        settle().await;
        advance(Duration::from_secs(30)).await;
        settle().await;
        assert_eq!(
            *log.lock().unwrap(),
            [(Connectivity::Connected, Duration::ZERO)]
        );
        // A long outage is reported once, at exactly the delay after the last disconnect.
        tx.send(0).unwrap();
        settle().await;
        advance(Duration::from_millis(9_999)).await;
        settle().await;
        assert_eq!(log.lock().unwrap().len(), 1);
        advance(Duration::from_millis(1)).await;
        settle().await;
        assert_eq!(
            log.lock().unwrap()[1],
            (Connectivity::Lost, Duration::from_secs(49))
        );
        advance(Duration::from_secs(100)).await;
        settle().await;
        assert_eq!(log.lock().unwrap().len(), 2, "reported once");
        drop(tx);
        task.await.unwrap();
    }

    #[test]
    fn fail_mode_text_and_meaning() {
        assert_eq!("secure".parse(), Ok(FailMode::Secure));
        assert_eq!(FailMode::Standalone.to_string(), "standalone");
        assert!("open"
            .parse::<FailMode>()
            .unwrap_err()
            .contains("standalone"));
        assert!(FailMode::Standalone.learning_after(Connectivity::Lost));
        assert!(!FailMode::Secure.learning_after(Connectivity::Lost));
        assert!(!FailMode::Standalone.learning_after(Connectivity::Connected));
    }
}
