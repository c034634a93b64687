//! Adoption of cluster-level objects: live pools and backup jobs back into manifests.
