//! The registry client's settings, named as the Confluent clients name them
//! (`schema.registry.url`, `basic.auth.user.info`, `schema.registry.ssl.*`), as environment
//! variables. They are read only when a selected sink uses a registry format.

use sluice_core::settings::forms::Given;
use sluice_core::settings::{EnvReader, SettingsError, Var, Variable};
use std::fmt;
use std::path::PathBuf;

/// `SCHEMA_REGISTRY_URL`.
pub const URL: Var<Given> = Var::new(
    "SCHEMA_REGISTRY_URL",
    "(none)",
    "the Confluent-compatible API's base URL (http:// or https://); required by avro, protobuf and json-schema sinks",
);
/// `SCHEMA_REGISTRY_BASIC_AUTH_USER_INFO`.
pub const USER_INFO: Var<Given> = Var::new(
    "SCHEMA_REGISTRY_BASIC_AUTH_USER_INFO",
    "(none)",
    "user:password for HTTP basic auth",
)
.secret();
/// `SCHEMA_REGISTRY_SSL_CA_LOCATION`.
pub const CA: Var<Given> = Var::new(
    "SCHEMA_REGISTRY_SSL_CA_LOCATION",
    "(the Mozilla roots)",
    "PEM file of the CA certificates an https:// registry is checked against",
);
/// `SCHEMA_REGISTRY_SSL_CERTIFICATE_LOCATION`.
pub const CERTIFICATE: Var<Given> = Var::new(
    "SCHEMA_REGISTRY_SSL_CERTIFICATE_LOCATION",
    "(none)",
    "PEM file of the client certificate chain (mutual TLS)",
);
/// `SCHEMA_REGISTRY_SSL_KEY_LOCATION`.
pub const KEY: Var<Given> = Var::new(
    "SCHEMA_REGISTRY_SSL_KEY_LOCATION",
    "(none)",
    "PEM file of the client certificate's private key",
);
/// `SCHEMA_REGISTRY_TIMEOUT_MS`.
pub const TIMEOUT: Var<sluice_core::settings::forms::Millis> = Var::new(
    "SCHEMA_REGISTRY_TIMEOUT_MS",
    10_000,
    "one request to the registry, at most",
);

/// Every variable, for `--help` and the README's table.
pub fn variables() -> Vec<Variable> {
    vec![
        URL.variable(),
        USER_INFO.variable(),
        CA.variable(),
        CERTIFICATE.variable(),
        KEY.variable(),
        TIMEOUT.variable(),
    ]
}

/// Where the registry is and how to reach it.
#[derive(Clone, PartialEq, Eq)]
pub struct RegistrySettings {
    /// The Confluent-compatible base URL, without a trailing `/`.
    pub url: String,
    /// `user:password` for basic auth (never printed).
    pub user_info: Option<String>,
    /// The CA certificates (PEM) an `https://` registry is checked against.
    pub ca: Option<PathBuf>,
    /// The client certificate chain and its key (PEM), for mutual TLS.
    pub client: Option<(PathBuf, PathBuf)>,
    /// One request's timeout.
    pub timeout: std::time::Duration,
}

impl fmt::Debug for RegistrySettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegistrySettings")
            .field("url", &self.url)
            .field("user_info", &self.user_info.as_ref().map(|_| "***"))
            .field("ca", &self.ca)
            .field("client", &self.client)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl RegistrySettings {
    /// The settings from `lookup`; an error names the variable.
    pub fn from_lookup(lookup: &dyn Fn(&str) -> Option<String>) -> Result<Self, SettingsError> {
        let env = EnvReader::new(lookup);
        let Some(url) = URL.read_set(&env)?.filter(|u| !u.trim().is_empty()) else {
            return Err(SettingsError::invalid(
                URL.name,
                "",
                "required: a sink reads a schema registry format (avro, protobuf, json-schema)",
            ));
        };
        let url = url.trim().trim_end_matches('/').to_owned();
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(SettingsError::invalid(
                URL.name,
                &url,
                "an http:// or https:// URL",
            ));
        }
        let user_info = USER_INFO.read_set(&env)?.filter(|u| !u.is_empty());
        if user_info.as_deref().is_some_and(|u| !u.contains(':')) {
            return Err(SettingsError::invalid(
                USER_INFO.name,
                "***",
                "user:password",
            ));
        }
        let path = |var: &Var<Given>| -> Result<Option<PathBuf>, SettingsError> {
            Ok(var
                .read_set(&env)?
                .filter(|p| !p.is_empty())
                .map(PathBuf::from))
        };
        let client = match (path(&CERTIFICATE)?, path(&KEY)?) {
            (Some(cert), Some(key)) => Some((cert, key)),
            (None, None) => None,
            (Some(_), None) => {
                return Err(SettingsError::invalid(
                    KEY.name,
                    "",
                    "required with SCHEMA_REGISTRY_SSL_CERTIFICATE_LOCATION",
                ));
            }
            (None, Some(_)) => {
                return Err(SettingsError::invalid(
                    CERTIFICATE.name,
                    "",
                    "required with SCHEMA_REGISTRY_SSL_KEY_LOCATION",
                ));
            }
        };
        Ok(Self {
            url,
            user_info,
            ca: path(&CA)?,
            client,
            timeout: TIMEOUT.read(&env)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn read(pairs: &[(&str, &str)]) -> Result<RegistrySettings, SettingsError> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        RegistrySettings::from_lookup(&|name| map.get(name).cloned())
    }

    #[test]
    fn the_url_is_required_and_named() {
        let error = read(&[]).unwrap_err().to_string();
        assert!(error.contains("SCHEMA_REGISTRY_URL"), "{error}");
        let error = read(&[("SCHEMA_REGISTRY_URL", "registry:8081")])
            .unwrap_err()
            .to_string();
        assert!(error.contains("http://"), "{error}");
    }

    #[test]
    fn a_secret_never_reaches_an_error_or_debug() {
        let error = read(&[
            ("SCHEMA_REGISTRY_URL", "https://r.example/"),
            ("SCHEMA_REGISTRY_BASIC_AUTH_USER_INFO", "hunter2"),
        ])
        .unwrap_err()
        .to_string();
        assert!(!error.contains("hunter2"), "{error}");
        let settings = read(&[
            ("SCHEMA_REGISTRY_URL", "https://r.example/"),
            ("SCHEMA_REGISTRY_BASIC_AUTH_USER_INFO", "me:hunter2"),
        ])
        .unwrap();
        assert_eq!(settings.url, "https://r.example");
        assert!(!format!("{settings:?}").contains("hunter2"));
    }

    #[test]
    fn a_client_certificate_needs_its_key() {
        let error = read(&[
            ("SCHEMA_REGISTRY_URL", "https://r.example"),
            ("SCHEMA_REGISTRY_SSL_CERTIFICATE_LOCATION", "/c.pem"),
        ])
        .unwrap_err()
        .to_string();
        assert!(
            error.contains("SCHEMA_REGISTRY_SSL_KEY_LOCATION"),
            "{error}"
        );
    }
}
