//! A remote attempt's clock: queue time apart from work time. Until its
//! worker's first line the attempt waits in its engine's queue (a cluster
//! may hold a job for hours), which counts against no limit of the
//! attempt's, only the queue's own; from that line on, the lost-lane rule
//! (no result past the attempt's limits) counts. Pure: every `now` is given,
//! so the rules are tested without waiting.

use std::time::{Duration, Instant};

/// The limits a remote attempt is held to.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// From the worker's start: no result past this, the lane is lost.
    pub silence: Duration,
    /// From the attempt's hand-over: still not started, the lane is lost.
    pub queue: Duration,
    /// Silent this long after the hand-over, the attempt is said queued.
    pub queued_after: Duration,
    /// Asked to stop, the worker has this long to push its work and end.
    pub stop_grace: Duration,
}

/// Where a remote attempt stands by its clock.
#[derive(Debug, Clone)]
pub struct WorkerClock {
    limits: Limits,
    handed: Instant,
    running: Option<Instant>,
    queued_said: bool,
    stop_asked: bool,
    deadline: Instant,
}

/// Why the clock ran out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RanOut {
    /// Never started within the queue's limit.
    NeverStarted { waited: Duration },
    /// Started, then no result within this long.
    NoResult { within: Duration },
}

impl WorkerClock {
    /// An attempt handed to its engine at `handed`.
    pub fn new(limits: Limits, handed: Instant) -> WorkerClock {
        WorkerClock {
            limits,
            handed,
            running: None,
            queued_said: false,
            stop_asked: false,
            deadline: handed + limits.queue,
        }
    }

    /// When the attempt is to be said queued: `None` once said, or once
    /// it runs (an engine that starts it at once says nothing of the kind).
    pub fn say_queued_at(&self) -> Option<Instant> {
        match self.running.is_none() && !self.queued_said {
            true => Some(self.handed + self.limits.queued_after),
            false => None,
        }
    }

    /// The attempt is said queued now.
    pub fn said_queued(&mut self) {
        self.queued_said = true;
    }

    /// A line from the worker at `now`. Its first says the attempt runs:
    /// then how long it was queued, when it was said queued (that is when
    /// it is said running too).
    pub fn line(&mut self, now: Instant) -> Option<Duration> {
        if self.running.is_some() {
            return None;
        }
        self.running = Some(now);
        if !self.stop_asked {
            self.deadline = now + self.limits.silence;
        }
        self.queued_said
            .then(|| now.saturating_duration_since(self.handed))
    }

    /// The worker was asked to stop at `now`: it gets its grace, and no more
    /// than it had.
    pub fn stop_asked(&mut self, now: Instant) {
        self.stop_asked = true;
        self.deadline = self.deadline.min(now + self.limits.stop_grace);
    }

    /// When the lane is lost if nothing more comes.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Why the clock ran out, at its deadline.
    pub fn ran_out(&self) -> RanOut {
        match self.running {
            Some(from) => RanOut::NoResult {
                within: self.deadline.saturating_duration_since(from),
            },
            None => RanOut::NeverStarted {
                waited: self.deadline.saturating_duration_since(self.handed),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn limits() -> Limits {
        Limits {
            silence: 100 * S,
            queue: 3600 * S,
            queued_after: 3 * S,
            stop_grace: 10 * S,
        }
    }

    #[test]
    fn a_worker_that_starts_at_once_is_never_said_queued_and_its_limit_counts_from_its_start() {
        let t0 = Instant::now();
        let mut c = WorkerClock::new(limits(), t0);
        assert_eq!(c.say_queued_at(), Some(t0 + 3 * S));
        assert_eq!(c.line(t0 + S), None);
        assert_eq!(c.say_queued_at(), None);
        assert_eq!(c.deadline(), t0 + 101 * S);
        // Later lines change nothing.
        assert_eq!(c.line(t0 + 50 * S), None);
        assert_eq!(c.deadline(), t0 + 101 * S);
        assert_eq!(c.ran_out(), RanOut::NoResult { within: 100 * S });
    }

    #[test]
    fn queue_time_counts_against_no_limit_of_the_attempts() {
        let t0 = Instant::now();
        let mut c = WorkerClock::new(limits(), t0);
        // Queued: the lost-lane rule would have fired at 100 s; it waits.
        c.said_queued();
        assert_eq!(c.say_queued_at(), None);
        assert_eq!(c.deadline(), t0 + 3600 * S);
        // Started after 40 minutes: queued that long, its limit from now.
        let start = t0 + 2400 * S;
        assert_eq!(c.line(start), Some(2400 * S));
        assert_eq!(c.deadline(), start + 100 * S);
    }

    #[test]
    fn a_worker_that_never_starts_is_lost_at_the_queues_limit() {
        let t0 = Instant::now();
        let mut c = WorkerClock::new(limits(), t0);
        c.said_queued();
        assert_eq!(c.deadline(), t0 + 3600 * S);
        assert_eq!(c.ran_out(), RanOut::NeverStarted { waited: 3600 * S });
    }

    #[test]
    fn a_stop_gives_the_grace_and_never_more_than_was_left() {
        let t0 = Instant::now();
        // Queued, then asked to stop: the grace from then.
        let mut c = WorkerClock::new(limits(), t0);
        c.stop_asked(t0 + 5 * S);
        assert_eq!(c.deadline(), t0 + 15 * S);
        // Its start after the stop does not give it the full limit again.
        c.line(t0 + 6 * S);
        assert_eq!(c.deadline(), t0 + 15 * S);

        // Running with 2 s left: asked to stop, still 2 s.
        let mut c = WorkerClock::new(limits(), t0);
        c.line(t0);
        c.stop_asked(t0 + 98 * S);
        assert_eq!(c.deadline(), t0 + 100 * S);
    }
}
