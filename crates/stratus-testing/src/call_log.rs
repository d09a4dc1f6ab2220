//! The call log of the fakes (`FakeCloud`, `MockPodProvider`): the most
//! recent calls in order, and an exact count per method, so a fake that
//! runs for hours (a soak) holds a bounded log.

use std::collections::{HashMap, VecDeque};

/// How many calls the log keeps in order; counts stay exact beyond it.
pub(crate) const CAPACITY: usize = 10_000;

/// Calls of type `T`, by method name.
#[derive(Debug)]
pub(crate) struct CallLog<T> {
    recent: VecDeque<T>,
    counts: HashMap<&'static str, usize>,
}

impl<T> Default for CallLog<T> {
    fn default() -> Self {
        Self {
            recent: VecDeque::new(),
            counts: HashMap::new(),
        }
    }
}

impl<T: Clone> CallLog<T> {
    /// Record a call of `method`.
    pub(crate) fn push(&mut self, method: &'static str, call: T) {
        *self.counts.entry(method).or_default() += 1;
        if self.recent.len() == CAPACITY {
            self.recent.pop_front();
        }
        self.recent.push_back(call);
    }

    /// The last [`CAPACITY`] calls, oldest first.
    pub(crate) fn recent(&self) -> Vec<T> {
        self.recent.iter().cloned().collect()
    }

    /// Every call of `method` since the start or the last clear.
    pub(crate) fn count(&self, method: &str) -> usize {
        self.counts.get(method).copied().unwrap_or(0)
    }

    /// Forget every call.
    pub(crate) fn clear(&mut self) {
        self.recent.clear();
        self.counts.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_recent_calls_and_exact_counts() {
        let mut log = CallLog::default();
        for i in 0..CAPACITY + 5 {
            log.push(if i % 2 == 0 { "even" } else { "odd" }, i);
        }
        let recent = log.recent();
        assert_eq!(recent.len(), CAPACITY);
        assert_eq!(recent[0], 5);
        assert_eq!(recent[CAPACITY - 1], CAPACITY + 4);
        assert_eq!(log.count("even") + log.count("odd"), CAPACITY + 5);
        assert_eq!(log.count("none"), 0);
        log.clear();
        assert!(log.recent().is_empty());
        assert_eq!(log.count("even"), 0);
    }
}
