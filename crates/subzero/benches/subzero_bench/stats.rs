//! Samples and the two statistics the report shows for each: median and p95.

/// Measurements of one figure, in the figure's unit.
#[derive(Clone, Debug, Default)]
pub struct Samples(Vec<f64>);

impl Samples {
    pub fn push(&mut self, value: f64) {
        self.0.push(value);
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    fn sorted(&self) -> Vec<f64> {
        let mut values = self.0.clone();
        values.sort_by(f64::total_cmp);
        values
    }

    /// Nearest-rank percentile (`p` in 0..=100); NaN without samples.
    pub fn percentile(&self, p: f64) -> f64 {
        let values = self.sorted();
        if values.is_empty() {
            return f64::NAN;
        }
        let rank = ((p / 100.0) * values.len() as f64).ceil() as usize;
        values[rank.clamp(1, values.len()) - 1]
    }

    pub fn median(&self) -> f64 {
        self.percentile(50.0)
    }

    pub fn p95(&self) -> f64 {
        self.percentile(95.0)
    }

    pub fn max(&self) -> f64 {
        self.sorted().last().copied().unwrap_or(f64::NAN)
    }
}

/// Milliseconds since `start`.
pub fn ms_since(start: std::time::Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1000.0
}
