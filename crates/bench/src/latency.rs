//! Latency histograms carried inside results (HdrHistogram's V2 encoding, base64), so results
//! from several ranks merge into exact percentiles instead of the worst rank's.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};

/// The histogram as text for a JSON result; `None` if it cannot be encoded.
pub fn encode(histogram: &Histogram<u64>) -> Option<String> {
    let mut bytes = Vec::new();
    V2Serializer::new().serialize(histogram, &mut bytes).ok()?;
    Some(STANDARD.encode(bytes))
}

/// A histogram encoded by `encode`; `None` if the text is not one.
pub fn decode(text: &str) -> Option<Histogram<u64>> {
    let bytes = STANDARD.decode(text).ok()?;
    Deserializer::new().deserialize(&mut bytes.as_slice()).ok()
}

/// The sum of the encoded histograms, if every one is present and valid.
pub fn merge<'a>(encoded: impl IntoIterator<Item = Option<&'a str>>) -> Option<Histogram<u64>> {
    // A fresh histogram resizes itself to take each rank's range; decoded ones do not.
    let mut total = Histogram::<u64>::new(3).ok()?;
    let mut any = false;
    for text in encoded {
        total.add(&decode(text?)?).ok()?;
        any = true;
    }
    any.then_some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoded_histograms_merge_into_exact_percentiles() {
        let mut fast = Histogram::<u64>::new(3).unwrap();
        let mut slow = Histogram::<u64>::new(3).unwrap();
        for v in 1..=900 {
            fast.record(v).unwrap();
        }
        for v in 10_000..10_100 {
            slow.record(v).unwrap();
        }
        let merged = merge([encode(&fast).as_deref(), encode(&slow).as_deref()]).unwrap();
        assert_eq!(merged.len(), 1000);
        // The median is the fast rank's 500th value, not the slow rank's median.
        assert_eq!(merged.value_at_quantile(0.5), 500);
        assert!(merged.value_at_quantile(0.95) >= 10_000);
        assert!(merge([encode(&fast).as_deref(), None]).is_none());
        assert!(decode("not a histogram").is_none());
    }
}
