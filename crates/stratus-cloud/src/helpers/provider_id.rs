//! Provider IDs: `<provider-name>://<instance-id>`.

use std::fmt;
use std::str::FromStr;

use crate::{CloudError, CloudErrorKind};

/// Why a provider ID is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderIdError {
    /// The string is empty.
    #[error("provider ID is empty")]
    Empty,
    /// There is no `://` separator.
    #[error("provider ID {0:?} is not of the form <provider>://<id>")]
    MissingSeparator(String),
    /// The provider name is empty or not a URL scheme (a letter, then
    /// letters, digits, `+`, `-` or `.`).
    #[error("provider ID {0:?} has an invalid provider name")]
    InvalidProviderName(String),
    /// Nothing follows the separator.
    #[error("provider ID {0:?} has an empty instance ID")]
    EmptyId(String),
    /// The instance ID contains whitespace or control characters.
    #[error("provider ID {0:?} contains whitespace or control characters")]
    InvalidId(String),
    /// The ID belongs to another provider.
    #[error("provider ID {id:?} belongs to provider {found:?}, not {expected:?}")]
    WrongProvider {
        /// The whole provider ID.
        id: String,
        /// The provider name wanted.
        expected: String,
        /// The provider name found.
        found: String,
    },
}

impl From<ProviderIdError> for CloudError {
    /// A garbage provider ID is [`CloudErrorKind::InvalidInput`]: controllers
    /// warn once and back off instead of retrying in a hot loop.
    fn from(err: ProviderIdError) -> Self {
        CloudError::new(CloudErrorKind::InvalidInput, err.to_string()).with_source(err)
    }
}

/// A validated provider ID (`spec.providerID`), e.g. `aws:///us-east-1a/i-0abc`
/// or `hcloud://1234`.
///
/// ```
/// use stratus_cloud::ProviderId;
///
/// let id: ProviderId = "aws:///us-east-1a/i-0abc".parse().unwrap();
/// assert_eq!(id.provider(), "aws");
/// assert_eq!(id.id(), "/us-east-1a/i-0abc");
/// assert_eq!(id.to_string(), "aws:///us-east-1a/i-0abc");
///
/// assert!(ProviderId::parse_for("hcloud", "hcloud://42").is_ok());
/// assert!(ProviderId::parse_for("hcloud", "aws://42").is_err());
/// assert!("i-0abc".parse::<ProviderId>().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProviderId {
    provider: String,
    id: String,
}

impl ProviderId {
    /// The separator between provider name and instance ID.
    pub const SEPARATOR: &'static str = "://";

    /// Build a provider ID from its parts, validating both.
    pub fn new(
        provider: impl Into<String>,
        id: impl Into<String>,
    ) -> Result<Self, ProviderIdError> {
        let provider = provider.into();
        let id = id.into();
        let whole = format!("{provider}{}{id}", Self::SEPARATOR);
        validate_provider_name(&provider, &whole)?;
        validate_id(&id, &whole)?;
        Ok(Self { provider, id })
    }

    /// Parse and check that the ID belongs to `provider`.
    pub fn parse_for(provider: &str, s: &str) -> Result<Self, ProviderIdError> {
        let parsed: ProviderId = s.parse()?;
        if parsed.provider != provider {
            return Err(ProviderIdError::WrongProvider {
                id: s.to_owned(),
                expected: provider.to_owned(),
                found: parsed.provider,
            });
        }
        Ok(parsed)
    }

    /// The provider name (the scheme).
    pub fn provider(&self) -> &str {
        &self.provider
    }

    /// The instance ID: everything after `://`.
    pub fn id(&self) -> &str {
        &self.id
    }
}

fn validate_provider_name(name: &str, whole: &str) -> Result<(), ProviderIdError> {
    let mut chars = name.chars();
    let valid = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if valid {
        Ok(())
    } else {
        Err(ProviderIdError::InvalidProviderName(whole.to_owned()))
    }
}

fn validate_id(id: &str, whole: &str) -> Result<(), ProviderIdError> {
    if id.is_empty() || id.chars().all(|c| c == '/') {
        return Err(ProviderIdError::EmptyId(whole.to_owned()));
    }
    if id.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(ProviderIdError::InvalidId(whole.to_owned()));
    }
    Ok(())
}

impl FromStr for ProviderId {
    type Err = ProviderIdError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.is_empty() {
            return Err(ProviderIdError::Empty);
        }
        let (provider, id) = s
            .split_once(Self::SEPARATOR)
            .ok_or_else(|| ProviderIdError::MissingSeparator(s.to_owned()))?;
        validate_provider_name(provider, s)?;
        validate_id(id, s)?;
        Ok(Self {
            provider: provider.to_owned(),
            id: id.to_owned(),
        })
    }
}

impl fmt::Display for ProviderId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}{}", self.provider, Self::SEPARATOR, self.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        for s in [
            "aws:///us-east-1a/i-0abc",
            "gce://project/zone/name",
            "azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm",
            "hcloud://1234",
            "kind://docker/kind/kind-control-plane",
            "fake+v2://a.b-c",
        ] {
            let id: ProviderId = s.parse().unwrap_or_else(|e| panic!("{s}: {e}"));
            assert_eq!(id.to_string(), s);
            assert_eq!(ProviderId::new(id.provider(), id.id()).unwrap(), id);
        }
    }

    #[test]
    fn garbage_is_rejected_with_a_typed_error() {
        assert_eq!("".parse::<ProviderId>(), Err(ProviderIdError::Empty));
        assert!(matches!(
            "i-123".parse::<ProviderId>(),
            Err(ProviderIdError::MissingSeparator(_))
        ));
        assert!(matches!(
            "aws:/i-123".parse::<ProviderId>(),
            Err(ProviderIdError::MissingSeparator(_))
        ));
        assert!(matches!(
            "://i-123".parse::<ProviderId>(),
            Err(ProviderIdError::InvalidProviderName(_))
        ));
        assert!(matches!(
            "1aws://i-123".parse::<ProviderId>(),
            Err(ProviderIdError::InvalidProviderName(_))
        ));
        assert!(matches!(
            "a ws://i-123".parse::<ProviderId>(),
            Err(ProviderIdError::InvalidProviderName(_))
        ));
        assert!(matches!(
            "aws://".parse::<ProviderId>(),
            Err(ProviderIdError::EmptyId(_))
        ));
        assert!(matches!(
            "aws:///".parse::<ProviderId>(),
            Err(ProviderIdError::EmptyId(_))
        ));
        assert!(matches!(
            "aws://i 123".parse::<ProviderId>(),
            Err(ProviderIdError::InvalidId(_))
        ));
        assert!(matches!(
            "aws://i-1\n".parse::<ProviderId>(),
            Err(ProviderIdError::InvalidId(_))
        ));
        assert!(matches!(
            ProviderId::new("aws", ""),
            Err(ProviderIdError::EmptyId(_))
        ));
    }

    #[test]
    fn wrong_provider() {
        let err = ProviderId::parse_for("gce", "aws://i-1").unwrap_err();
        assert_eq!(
            err.to_string(),
            "provider ID \"aws://i-1\" belongs to provider \"aws\", not \"gce\""
        );
    }

    #[test]
    fn converts_to_invalid_input() {
        let err: CloudError = "nonsense".parse::<ProviderId>().unwrap_err().into();
        assert!(err.is_invalid_input());
    }
}
