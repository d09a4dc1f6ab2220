//! Addressing a container.

use std::fmt;

/// A container of a pod: namespace, pod name and container name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContainerRef {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub pod: String,
    /// The container's name.
    pub container: String,
}

impl ContainerRef {
    /// A reference to `namespace/pod/container`.
    pub fn new(
        namespace: impl Into<String>,
        pod: impl Into<String>,
        container: impl Into<String>,
    ) -> Self {
        Self {
            namespace: namespace.into(),
            pod: pod.into(),
            container: container.into(),
        }
    }
}

impl fmt::Display for ContainerRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.namespace, self.pod, self.container)
    }
}
