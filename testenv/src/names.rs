//! `metadata.generateName` suffixes.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// kube-apiserver's suffix alphabet: no vowels (no accidental words), no look-alikes.
const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// How the server completes `metadata.generateName`.
#[derive(Clone, Default)]
pub enum NameGenerator {
    /// A random 5-character suffix, as kube-apiserver does (`sd-x7k2p`).
    #[default]
    Random,
    /// `<generateName>%05d` with one 1-based counter per server (`sd-00001`), as Knative's
    /// table tests name objects.
    Sequential(Arc<AtomicU64>),
    /// Any other scheme: receives `generateName`, returns the full name.
    Custom(Arc<dyn Fn(&str) -> String + Send + Sync>),
}

impl NameGenerator {
    /// The sequential generator, counting from 1.
    pub fn sequential() -> Self {
        Self::Sequential(Arc::new(AtomicU64::new(0)))
    }

    pub(crate) fn generate(&self, prefix: &str) -> String {
        match self {
            Self::Random => {
                let bytes = uuid::Uuid::new_v4().into_bytes();
                let suffix: String = bytes
                    .iter()
                    .take(5)
                    .map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()]))
                    .collect();
                format!("{prefix}{suffix}")
            }
            Self::Sequential(n) => {
                let i = n.fetch_add(1, Ordering::Relaxed) + 1;
                format!("{prefix}{i:05}")
            }
            Self::Custom(f) => f(prefix),
        }
    }
}

impl fmt::Debug for NameGenerator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Random => f.write_str("Random"),
            Self::Sequential(n) => write!(f, "Sequential({})", n.load(Ordering::Relaxed)),
            Self::Custom(_) => f.write_str("Custom"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_is_one_based() {
        let g = NameGenerator::sequential();
        assert_eq!(g.generate("sd-"), "sd-00001");
        assert_eq!(g.generate("sd-"), "sd-00002");
    }

    #[test]
    fn random_uses_alphabet() {
        let n = NameGenerator::Random.generate("x-");
        assert_eq!(n.len(), 7);
        assert!(n[2..].bytes().all(|b| ALPHABET.contains(&b)));
    }
}
