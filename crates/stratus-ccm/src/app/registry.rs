//! The cloud-provider registry: providers by name, built from the
//! `--cloud-config` bytes (Go: `RegisterCloudProvider`, `InitCloudProvider`),
//! as the virtual kubelet's pod-provider registry is in `stratus-kubelet`'s
//! `app`: a vendor's `main` registers its provider, the manager builds it.
//!
//! There is one global registry, for mains that register in a few lines, and
//! the [`ProviderRegistry`] value itself, for code that avoids globals.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use stratus_cloud::{CloudError, CloudProvider};
use stratus_runtime::registry::Registry;
pub use stratus_runtime::registry::RegistryError;

/// The provider name that means "the cloud provider runs outside this
/// process": initialization gives no provider.
pub const EXTERNAL_PROVIDER: &str = "external";

/// Builds a provider from the contents of the `--cloud-config` file, or
/// `None` when no file was given.
pub type CloudFactory =
    Arc<dyn Fn(Option<&[u8]>) -> Result<Arc<dyn CloudProvider>, CloudError> + Send + Sync>;

/// Why building a provider failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InitError {
    /// Nothing is registered under the name (the error lists the
    /// registered names).
    #[error(transparent)]
    Name(#[from] RegistryError),
    /// The cloud config file could not be read.
    #[error("couldn't open cloud provider configuration {}: {source}", .path.display())]
    ReadConfig {
        /// The path given with `--cloud-config`.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The provider's factory failed.
    #[error("could not init cloud provider {name:?}: {source}")]
    Init {
        /// The provider name.
        name: String,
        /// What the factory returned.
        #[source]
        source: CloudError,
    },
}

/// True if `name` means the provider runs elsewhere (Go: `IsExternal`).
pub fn is_external(name: &str) -> bool {
    name == EXTERNAL_PROVIDER
}

/// A set of provider factories by name.
///
/// ```
/// use std::sync::Arc;
/// use stratus_ccm::app::ProviderRegistry;
/// use stratus_cloud::CloudProvider;
///
/// struct Tiny;
/// impl CloudProvider for Tiny {
///     fn provider_name(&self) -> &str { "tiny" }
/// }
///
/// let registry = ProviderRegistry::new();
/// registry.register("tiny", |_config| Ok(Arc::new(Tiny) as Arc<dyn CloudProvider>)).unwrap();
/// assert!(registry.register("tiny", |_| Ok(Arc::new(Tiny) as _)).is_err());
///
/// let cloud = registry.get("tiny", None).unwrap();
/// assert_eq!(cloud.provider_name(), "tiny");
/// assert!(registry.init("external", None).unwrap().is_none());
/// let err = registry.get("nope", None).err().unwrap();
/// assert!(err.to_string().contains("registered: tiny"));
/// ```
pub struct ProviderRegistry {
    factories: Registry<CloudFactory>,
}

impl Default for ProviderRegistry {
    fn default() -> Self {
        Self::new()
    }
}

impl ProviderRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self {
            factories: Registry::new("cloud provider", &[EXTERNAL_PROVIDER]),
        }
    }

    /// Register `factory` under `name`. A second registration of the same
    /// name is an error (Go exits the process instead), as are the empty
    /// name and `external`.
    pub fn register<F>(&self, name: &str, factory: F) -> Result<(), RegistryError>
    where
        F: Fn(Option<&[u8]>) -> Result<Arc<dyn CloudProvider>, CloudError> + Send + Sync + 'static,
    {
        self.factories.register(name, Arc::new(factory))
    }

    /// True if a provider is registered under `name` (Go: `IsCloudProvider`).
    pub fn contains(&self, name: &str) -> bool {
        self.factories.contains(name)
    }

    /// The registered names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.factories.names()
    }

    /// Build the provider `name` from `config` (Go: `GetCloudProvider`, but an
    /// unknown name is an error listing the registered names).
    pub fn get(
        &self,
        name: &str,
        config: Option<&[u8]>,
    ) -> Result<Arc<dyn CloudProvider>, InitError> {
        let factory = self.factories.get(name)?;
        factory(config).map_err(|source| InitError::Init {
            name: name.to_owned(),
            source,
        })
    }

    /// Initialize the provider from the `--cloud-provider` and
    /// `--cloud-config` flags (Go: `InitCloudProvider`):
    ///
    /// - `""` and `"external"` give `Ok(None)`;
    /// - a config path (non-empty) is read whole and passed to the factory;
    ///   an unreadable file is an error naming the path;
    /// - an unknown name is an error listing the registered names.
    pub fn init(
        &self,
        name: &str,
        config_path: Option<&Path>,
    ) -> Result<Option<Arc<dyn CloudProvider>>, InitError> {
        if name.is_empty() || is_external(name) {
            return Ok(None);
        }
        // An unknown name is an error before the file is read.
        self.factories.get(name)?;
        let config = match config_path.filter(|p| !p.as_os_str().is_empty()) {
            Some(path) => Some(std::fs::read(path).map_err(|source| InitError::ReadConfig {
                path: path.to_owned(),
                source,
            })?),
            None => None,
        };
        self.get(name, config.as_deref()).map(Some)
    }
}

impl fmt::Debug for ProviderRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProviderRegistry")
            .field("names", &self.names())
            .finish()
    }
}

/// The process-wide registry.
pub fn global_registry() -> &'static ProviderRegistry {
    static GLOBAL: OnceLock<ProviderRegistry> = OnceLock::new();
    GLOBAL.get_or_init(ProviderRegistry::new)
}

/// Register a provider in the global registry (Go: `RegisterCloudProvider`).
pub fn register_cloud_provider<F>(name: &str, factory: F) -> Result<(), RegistryError>
where
    F: Fn(Option<&[u8]>) -> Result<Arc<dyn CloudProvider>, CloudError> + Send + Sync + 'static,
{
    global_registry().register(name, factory)
}

/// True if `name` is registered globally (Go: `IsCloudProvider`).
pub fn is_cloud_provider(name: &str) -> bool {
    global_registry().contains(name)
}

/// Initialize a provider from the global registry (Go: `InitCloudProvider`);
/// see [`ProviderRegistry::init`].
pub fn init_cloud_provider(
    name: &str,
    config_path: Option<&Path>,
) -> Result<Option<Arc<dyn CloudProvider>>, InitError> {
    global_registry().init(name, config_path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    struct Named(String);

    impl CloudProvider for Named {
        fn provider_name(&self) -> &str {
            &self.0
        }
    }

    fn echo_registry(seen: Arc<Mutex<Option<Vec<u8>>>>) -> ProviderRegistry {
        let registry = ProviderRegistry::new();
        registry
            .register("echo", move |config| {
                *seen.lock().unwrap() = config.map(<[u8]>::to_vec);
                Ok(Arc::new(Named("echo".into())) as Arc<dyn CloudProvider>)
            })
            .unwrap();
        registry
            .register("broken", |_| {
                Err(CloudError::invalid_input("missing token"))
            })
            .unwrap();
        registry
    }

    #[test]
    fn empty_and_external_give_no_provider() {
        let registry = echo_registry(Default::default());
        assert!(registry.init("", None).unwrap().is_none());
        assert!(registry.init("external", None).unwrap().is_none());
        assert!(is_external("external"));
        assert!(!is_external("echo"));
    }

    #[test]
    fn reserved_and_duplicate_names_are_errors() {
        let registry = echo_registry(Default::default());
        assert!(matches!(
            registry.register("", |_| Err(CloudError::not_implemented())),
            Err(RegistryError::ReservedName { .. })
        ));
        assert!(matches!(
            registry.register("external", |_| Err(CloudError::not_implemented())),
            Err(RegistryError::ReservedName { .. })
        ));
        let err = registry
            .register("echo", |_| Err(CloudError::not_implemented()))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "cloud provider \"echo\" was registered twice"
        );
    }

    #[test]
    fn unknown_name_lists_registered_names() {
        let registry = echo_registry(Default::default());
        let err = registry.init("aws", None).err().expect("unknown");
        assert_eq!(
            err.to_string(),
            "unknown cloud provider \"aws\" (registered: broken, echo)"
        );
        match err {
            InitError::Name(RegistryError::Unknown { registered, .. }) => {
                assert_eq!(registered, vec!["broken".to_owned(), "echo".to_owned()])
            }
            other => panic!("unexpected {other:?}"),
        }
        let empty = ProviderRegistry::new()
            .get("x", None)
            .err()
            .expect("unknown");
        assert!(empty.to_string().ends_with("(registered: none)"));
    }

    #[test]
    fn config_file_is_passed_to_the_factory() {
        let seen = Arc::new(Mutex::new(None));
        let registry = echo_registry(seen.clone());
        let dir = std::env::temp_dir().join(format!("stratus-registry-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("cloud.conf");
        std::fs::write(&path, b"[Global]\nzone = a\n").unwrap();

        let cloud = registry.init("echo", Some(&path)).unwrap().unwrap();
        assert_eq!(cloud.provider_name(), "echo");
        assert_eq!(
            seen.lock().unwrap().as_deref(),
            Some(&b"[Global]\nzone = a\n"[..])
        );

        registry.init("echo", None).unwrap();
        assert_eq!(*seen.lock().unwrap(), None);
        registry.init("echo", Some(Path::new(""))).unwrap();
        assert_eq!(*seen.lock().unwrap(), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn unreadable_config_names_the_path() {
        let registry = echo_registry(Default::default());
        let path = Path::new("/nonexistent/stratus/cloud.conf");
        let err = registry.init("echo", Some(path)).err().expect("read error");
        assert!(matches!(err, InitError::ReadConfig { .. }));
        assert!(
            err.to_string().starts_with(
                "couldn't open cloud provider configuration /nonexistent/stratus/cloud.conf: "
            ),
            "{err}"
        );
    }

    #[test]
    fn factory_errors_keep_their_kind() {
        let registry = echo_registry(Default::default());
        let err = registry.init("broken", None).err().expect("init error");
        assert_eq!(
            err.to_string(),
            "could not init cloud provider \"broken\": missing token"
        );
        match err {
            InitError::Init { source, .. } => assert!(source.is_invalid_input()),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn global_registry_round_trip() {
        register_cloud_provider("registry-test-global", |_| {
            Ok(Arc::new(Named("registry-test-global".into())) as Arc<dyn CloudProvider>)
        })
        .unwrap();
        assert!(is_cloud_provider("registry-test-global"));
        assert!(
            register_cloud_provider("registry-test-global", |_| Err(
                CloudError::not_implemented()
            ))
            .is_err()
        );
        let cloud = init_cloud_provider("registry-test-global", None)
            .unwrap()
            .unwrap();
        assert_eq!(cloud.provider_name(), "registry-test-global");
    }
}
