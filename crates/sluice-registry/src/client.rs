//! The HTTP side: one blocking request at a time to the Confluent-compatible API (a schema is
//! fetched once per id, so a pool of connections would buy nothing), with basic auth and
//! TLS (a CA, a client certificate) as the Confluent clients configure them.

use crate::error::RegistryError;
use crate::settings::RegistrySettings;
use base64::Engine;
use serde::Deserialize;
use std::collections::HashSet;
use ureq::tls::{Certificate, ClientCert, PemItem, PrivateKey, RootCerts, TlsConfig};

/// The registry's error code for a schema id it does not have.
const SCHEMA_NOT_FOUND: i64 = 40403;
/// … for a subject it does not have.
const SUBJECT_NOT_FOUND: i64 = 40401;
/// … for a version of a subject it does not have.
const VERSION_NOT_FOUND: i64 = 40402;

/// References followed from one schema, at most (a cycle or a runaway chain is a bad schema).
const MAX_REFERENCES: usize = 256;

/// A schema as the registry returns it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SchemaText {
    /// The schema's text (Avro JSON, a `.proto` file, a JSON Schema document).
    pub(crate) schema: String,
    /// `AVRO` (or absent), `PROTOBUF` or `JSON`.
    #[serde(default)]
    pub(crate) schema_type: Option<String>,
    /// The schemas it uses, by the name it uses them by.
    #[serde(default)]
    pub(crate) references: Vec<Reference>,
}

/// A reference to another subject's version.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Reference {
    /// The name the schema uses (a Protobuf import path, an Avro full name).
    pub(crate) name: String,
    /// The subject holding it.
    pub(crate) subject: String,
    /// Its version there.
    pub(crate) version: i64,
}

/// A subject's latest version.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Latest {
    /// The subject.
    pub subject: String,
    /// Its version number.
    pub version: i64,
    /// The schema id of that version.
    pub id: i32,
    /// The schema's text.
    pub schema: String,
    /// `AVRO` (or absent), `PROTOBUF` or `JSON`.
    #[serde(default)]
    pub schema_type: Option<String>,
    /// The schemas it uses.
    #[serde(default, skip_serializing)]
    references: Vec<Reference>,
}

/// The registry's error body.
#[derive(Debug, Deserialize)]
struct ErrorBody {
    error_code: Option<i64>,
    message: Option<String>,
}

/// A client of one registry.
#[derive(Debug, Clone)]
pub struct RegistryClient {
    agent: ureq::Agent,
    base: String,
    authorization: Option<String>,
}

impl RegistryClient {
    /// A client as `settings` say; a TLS file that cannot be read is an error.
    pub fn new(settings: &RegistrySettings) -> Result<Self, RegistryError> {
        let mut tls = TlsConfig::builder();
        if let Some(ca) = &settings.ca {
            let certs: Vec<Certificate<'static>> = pem_items(ca)?
                .into_iter()
                .filter_map(|item| match item {
                    PemItem::Certificate(cert) => Some(cert),
                    _ => None,
                })
                .collect();
            if certs.is_empty() {
                return Err(RegistryError::Tls(format!(
                    "{}: no certificate in it",
                    ca.display()
                )));
            }
            tls = tls.root_certs(RootCerts::new_with_certs(&certs));
        }
        if let Some((cert, key)) = &settings.client {
            let chain: Vec<Certificate<'static>> = pem_items(cert)?
                .into_iter()
                .filter_map(|item| match item {
                    PemItem::Certificate(cert) => Some(cert),
                    _ => None,
                })
                .collect();
            let key: PrivateKey<'static> = pem_items(key)?
                .into_iter()
                .find_map(|item| match item {
                    PemItem::PrivateKey(key) => Some(key),
                    _ => None,
                })
                .ok_or_else(|| {
                    RegistryError::Tls(format!("{}: no private key in it", key.display()))
                })?;
            tls = tls.client_cert(Some(ClientCert::new_with_certs(&chain, key)));
        }
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(settings.timeout))
            .http_status_as_error(false)
            .tls_config(tls.build())
            .build();
        Ok(Self {
            agent: ureq::Agent::new_with_config(config),
            base: settings.url.clone(),
            authorization: settings.user_info.as_ref().map(|info| {
                format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(info)
                )
            }),
        })
    }

    /// The schema of `id` and, transitively, the schemas it references (name, text).
    pub(crate) fn schema_with_references(
        &self,
        id: i32,
    ) -> Result<(SchemaText, Vec<(String, String)>), RegistryError> {
        // Only the registry's own "schema not found" refuses the id: any other 404 (a wrong
        // base URL, a proxy) is the registry not answering, and the records wait.
        let schema: SchemaText = self.get(&format!("/schemas/ids/{id}"), |body| {
            (body.code == Some(SCHEMA_NOT_FOUND)).then(|| RegistryError::UnknownId {
                id,
                reason: body.message.clone(),
            })
        })?;
        let references = self.references(id, &schema.references)?;
        Ok((schema, references))
    }

    /// Every subject the registry has.
    pub fn subjects(&self) -> Result<Vec<String>, RegistryError> {
        self.get("/subjects", |_| None)
    }

    /// The version numbers of `subject`, oldest first.
    pub fn versions(&self, subject: &str) -> Result<Vec<i64>, RegistryError> {
        let path = format!("/subjects/{}/versions", encode_segment(subject));
        self.get(&path, |body| {
            (body.code == Some(SUBJECT_NOT_FOUND)).then(|| RegistryError::UnknownSubject {
                subject: subject.to_owned(),
            })
        })
    }

    /// Version `version` of `subject` (a number, or `latest`), with its references.
    pub fn version(
        &self,
        subject: &str,
        version: &str,
    ) -> Result<(Latest, Vec<(String, String)>), RegistryError> {
        let path = format!("/subjects/{}/versions/{version}", encode_segment(subject));
        let found: Latest = self.get(&path, |body| {
            matches!(body.code, Some(SUBJECT_NOT_FOUND | VERSION_NOT_FOUND)).then(|| {
                RegistryError::UnknownSubject {
                    subject: subject.to_owned(),
                }
            })
        })?;
        let references = self.references(found.id, &found.references)?;
        Ok((found, references))
    }

    /// Every schema `references` name, depth first, each once.
    fn references(
        &self,
        id: i32,
        references: &[Reference],
    ) -> Result<Vec<(String, String)>, RegistryError> {
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        let mut todo: Vec<Reference> = references.to_vec();
        while let Some(reference) = todo.pop() {
            if !seen.insert((reference.subject.clone(), reference.version)) {
                continue;
            }
            if seen.len() > MAX_REFERENCES {
                return Err(RegistryError::Schema {
                    id,
                    reason: format!("more than {MAX_REFERENCES} references"),
                });
            }
            let path = format!(
                "/subjects/{}/versions/{}",
                encode_segment(&reference.subject),
                reference.version
            );
            let text: SchemaText = self.get(&path, |body| {
                matches!(body.code, Some(SUBJECT_NOT_FOUND | VERSION_NOT_FOUND)).then(|| {
                    RegistryError::MissingReference {
                        id,
                        reason: format!(
                            "its reference `{}` (subject `{}` version {}) is not in the registry",
                            reference.name, reference.subject, reference.version
                        ),
                    }
                })
            })?;
            todo.extend(text.references.iter().cloned());
            out.push((reference.name, text.schema));
        }
        Ok(out)
    }

    /// GETs `path` as JSON; a 404 is what `not_found` makes of the registry's error body.
    fn get<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        not_found: impl Fn(&ErrorBodyText) -> Option<RegistryError>,
    ) -> Result<T, RegistryError> {
        let url = format!("{}{path}", self.base);
        let mut request = self.agent.get(&url).header(
            "Accept",
            "application/vnd.schemaregistry.v1+json, application/json",
        );
        if let Some(authorization) = &self.authorization {
            request = request.header("Authorization", authorization);
        }
        let mut response = request.call().map_err(|error| RegistryError::Unreachable {
            url: url.clone(),
            reason: error.to_string(),
        })?;
        let status = response.status().as_u16();
        let body =
            response
                .body_mut()
                .read_to_string()
                .map_err(|error| RegistryError::Unreachable {
                    url: url.clone(),
                    reason: format!("reading the answer: {error}"),
                })?;
        if status == 404 {
            let text = ErrorBodyText::of(&body);
            if let Some(error) = not_found(&text) {
                tracing::debug!(%url, code = ?text.code, message = %text.message, "registry: not found");
                return Err(error);
            }
        }
        if !(200..300).contains(&status) {
            return Err(RegistryError::Status {
                url,
                status,
                body: body.chars().take(200).collect(),
            });
        }
        serde_json::from_str(&body).map_err(|error| RegistryError::Malformed {
            url,
            reason: error.to_string(),
        })
    }
}

/// A registry error body, read loosely (any 404 body is accepted).
#[derive(Debug)]
pub(crate) struct ErrorBodyText {
    /// `error_code` (40403: schema not found, 40401: subject not found, 40402: version not found).
    pub(crate) code: Option<i64>,
    /// `message`.
    pub(crate) message: String,
}

impl ErrorBodyText {
    fn of(body: &str) -> Self {
        match serde_json::from_str::<ErrorBody>(body) {
            Ok(parsed) => Self {
                code: parsed.error_code,
                message: parsed.message.unwrap_or_default(),
            },
            Err(_) => Self {
                code: None,
                message: body.chars().take(200).collect(),
            },
        }
    }
}

/// A path segment with the characters a subject name may hold that a URL may not, escaped.
fn encode_segment(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for byte in segment.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(char::from(byte));
            }
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

/// The PEM items of a file.
fn pem_items(path: &std::path::Path) -> Result<Vec<PemItem<'static>>, RegistryError> {
    let text = std::fs::read(path)
        .map_err(|error| RegistryError::Tls(format!("{}: {error}", path.display())))?;
    ureq::tls::parse_pem(&text)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| RegistryError::Tls(format!("{}: {error}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subject_is_one_path_segment() {
        assert_eq!(encode_segment("orders-value"), "orders-value");
        assert_eq!(encode_segment("a/b c"), "a%2Fb%20c");
    }

    #[test]
    fn an_error_body_is_read_loosely() {
        let text = ErrorBodyText::of(r#"{"error_code":40403,"message":"Schema not found"}"#);
        assert_eq!(text.code, Some(40403));
        assert_eq!(text.message, "Schema not found");
        let text = ErrorBodyText::of("<html>nope</html>");
        assert_eq!(text.code, None);
    }
}
