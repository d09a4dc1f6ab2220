//! The `{{config_flag}}` file: YAML, unknown keys refused.

use serde::Deserialize;

/// What the provider reads from `{{config_flag}}`. Add the {{backend}}'s
/// settings here (endpoint, credentials file, ...).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Config {
    /// The region, if the {{backend}} has regions.
    #[serde(default)]
    pub region: Option<String>,
}

/// A `{{config_flag}}` that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Not YAML, or not the expected shape (the message names the key).
    #[error("the {{config_flag}} file is not valid: {0}")]
    Malformed(String),
    /// A value is out of its domain.
    #[error("the {{config_flag}} file is not valid: {field}: {reason}")]
    Invalid {
        /// The key.
        field: &'static str,
        /// Why.
        reason: String,
    },
}

impl Config {
    /// Parse the file's bytes; no file is the default configuration.
    pub fn parse(bytes: Option<&[u8]>) -> Result<Self, ConfigError> {
        let Some(bytes) = bytes else {
            return Ok(Self::default());
        };
        let text = std::str::from_utf8(bytes).map_err(|e| ConfigError::Malformed(e.to_string()))?;
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        let config: Self =
            serde_saphyr::from_str(text).map_err(|e| ConfigError::Malformed(e.to_string()))?;
        if config.region.as_deref().is_some_and(str::is_empty) {
            return Err(ConfigError::Invalid {
                field: "region",
                reason: "must not be empty".into(),
            });
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_file_or_an_empty_one_is_the_default() {
        assert_eq!(Config::parse(None).unwrap(), Config::default());
        assert_eq!(Config::parse(Some(b"  \n")).unwrap(), Config::default());
    }

    #[test]
    fn reads_the_region() {
        let config = Config::parse(Some(b"region: eu-1\n")).unwrap();
        assert_eq!(config.region.as_deref(), Some("eu-1"));
    }

    #[test]
    fn bad_files_are_typed_errors_that_say_why() {
        let unknown = Config::parse(Some(b"regoin: eu-1\n")).unwrap_err();
        assert!(matches!(unknown, ConfigError::Malformed(_)), "{unknown}");
        assert!(unknown.to_string().contains("regoin"), "{unknown}");
        assert!(matches!(
            Config::parse(Some(b"region: ''\n")),
            Err(ConfigError::Invalid {
                field: "region",
                ..
            })
        ));
        assert!(Config::parse(Some(b"\xff\xfe")).is_err());
        assert!(Config::parse(Some(b"[not, a, map]")).is_err());
    }
}
