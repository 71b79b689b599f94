//! Peak worker memory, sampled on a thread while a scenario runs.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::procs::{hwm_mib, workers_of};

/// Polls the VmHWM of the broker's workers on a thread; keeps the largest. VmHWM is a
/// high-water mark, so a sample taken late still sees an earlier peak of a living worker.
pub(crate) struct HwmSampler {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Option<f64>>,
}

impl HwmSampler {
    /// Every 100 ms.
    pub(crate) fn start(broker: u32) -> HwmSampler {
        HwmSampler::every(broker, Duration::from_millis(100))
    }

    /// Every `interval` (a short one for workers that live only briefly).
    pub(crate) fn every(broker: u32, interval: Duration) -> HwmSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut peak: Option<f64> = None;
            while !flag.load(Ordering::Relaxed) {
                for worker in workers_of(broker) {
                    if let Some(hwm) = hwm_mib(worker) {
                        peak = Some(peak.map_or(hwm, |p| p.max(hwm)));
                    }
                }
                std::thread::sleep(interval);
            }
            peak
        });
        HwmSampler { stop, thread }
    }

    pub(crate) fn finish(self) -> Option<f64> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().ok().flatten()
    }
}
