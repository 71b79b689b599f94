//! Ids and digests: to the wire with `From`, back to the core with `TryFrom` (the core's
//! parse decides).

use subzero_core::digest::DigestParseError;
use subzero_core::{IdParseError, Sha256Digest};

use crate::v1::{common, grant_snapshot};

/// Implements `From<core id>` for a wire id (the core's text form always matches the
/// wire pattern) and `TryFrom<&wire id>` for the core id (the core's parse decides).
macro_rules! id_conversions {
    ($core:ident => $wire:ident) => {
        impl From<subzero_core::$core> for common::$wire {
            fn from(id: subzero_core::$core) -> Self {
                match common::$wire::try_from(id.to_string()) {
                    Ok(wire) => wire,
                    Err(e) => unreachable!(
                        "a core {} is its prefix and a 26-character ULID, which the wire pattern accepts: {e}",
                        stringify!($core)
                    ),
                }
            }
        }

        impl TryFrom<&common::$wire> for subzero_core::$core {
            type Error = IdParseError;
            fn try_from(id: &common::$wire) -> Result<Self, IdParseError> {
                subzero_core::$core::parse(id.as_str())
            }
        }
    };
}

id_conversions!(ChildId => ChildId);
id_conversions!(RunId => RunId);
id_conversions!(ArtifactId => ArtifactId);

impl From<Sha256Digest> for grant_snapshot::Digest {
    fn from(digest: Sha256Digest) -> Self {
        match grant_snapshot::Digest::try_from(digest.to_string()) {
            Ok(wire) => wire,
            Err(e) => unreachable!(
                "a core digest is `sha256:` and 64 lowercase hex digits, which the wire pattern accepts: {e}"
            ),
        }
    }
}

impl TryFrom<&grant_snapshot::Digest> for Sha256Digest {
    type Error = DigestParseError;
    fn try_from(digest: &grant_snapshot::Digest) -> Result<Self, DigestParseError> {
        Sha256Digest::parse(digest.as_str())
    }
}

#[cfg(test)]
mod tests {
    use subzero_core::{ArtifactId, ChildId, RunId};

    use super::*;

    #[test]
    fn ids_of_every_ulid_cross_to_the_wire_and_back() {
        let fresh = ChildId::generate().to_string();
        let fresh = fresh.trim_start_matches(ChildId::PREFIX);
        for ulid in [
            "00000000000000000000000000",
            "7ZZZZZZZZZZZZZZZZZZZZZZZZZ",
            fresh,
        ] {
            let child = ChildId::parse(&format!("ch_{ulid}"))
                .expect("the smallest, largest and a fresh ULID");
            let run = RunId::parse(&format!("run_{ulid}")).expect("run id");
            let artifact = ArtifactId::parse(&format!("art_{ulid}")).expect("artifact id");
            let wire_child = common::ChildId::from(child);
            assert_eq!(wire_child.as_str(), child.to_string());
            assert_eq!(ChildId::try_from(&wire_child), Ok(child));
            assert_eq!(RunId::try_from(&common::RunId::from(run)), Ok(run));
            assert_eq!(
                ArtifactId::try_from(&common::ArtifactId::from(artifact)),
                Ok(artifact)
            );
        }
    }

    #[test]
    fn digests_cross_to_the_wire_and_back() {
        let digest = Sha256Digest::of(b"leaf");
        let wire = grant_snapshot::Digest::from(digest);
        assert_eq!(wire.as_str(), digest.to_string());
        assert_eq!(Sha256Digest::try_from(&wire).ok(), Some(digest));
    }
}
