//! [`WebhookConfig`]: how the admission webhooks are served and registered
//! (the `--webhook-*` flags).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// What admission does when a plugin's `Validate` or `Default` call fails
/// and the plugin declared no failure policy of its own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FailurePolicy {
    /// Refuse the object, naming the plugin and the failure.
    #[default]
    Fail,
    /// Admit the object (unchanged by that plugin), with a warning.
    Ignore,
}

impl FailurePolicy {
    /// Every policy, as the flag spells it.
    pub const NAMES: [&str; 2] = ["Fail", "Ignore"];

    /// The webhook configuration's `failurePolicy` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fail => "Fail",
            Self::Ignore => "Ignore",
        }
    }
}

impl std::str::FromStr for FailurePolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "Fail" => Ok(Self::Fail),
            "Ignore" => Ok(Self::Ignore),
            other => Err(format!(
                "unknown failure policy {other:?}; use Fail or Ignore"
            )),
        }
    }
}

/// What admission does with an object no plugin can be asked about (none
/// registered and ready for its kind).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NoPlugin {
    /// Admit it, with a warning saying that no plugin was asked and why.
    #[default]
    Allow,
    /// Refuse it, saying why.
    Deny,
}

impl NoPlugin {
    /// Every choice, as the flag spells it.
    pub const NAMES: [&str; 2] = ["allow", "deny"];
}

impl std::str::FromStr for NoPlugin {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "allow" => Ok(Self::Allow),
            "deny" => Ok(Self::Deny),
            other => Err(format!("unknown choice {other:?}; use allow or deny")),
        }
    }
}

/// How the API server reaches the webhooks (the configurations'
/// `clientConfig`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientConfig {
    /// A URL (`https://host:port`): outside a cluster, or in tests.
    Url(String),
    /// A Service in the cluster.
    Service {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Its port (443 unless given).
        port: u16,
    },
}

impl ClientConfig {
    /// Parses `--webhook-service namespace/name[:port]`.
    ///
    /// # Errors
    /// A message with the expected form.
    pub fn parse_service(s: &str) -> Result<Self, String> {
        let usage = || {
            format!("{s:?}: expected NAMESPACE/NAME[:PORT], e.g. kplug-system/kplug-webhook:443")
        };
        let (namespace, rest) = s.split_once('/').ok_or_else(usage)?;
        let (name, port) = match rest.split_once(':') {
            Some((name, port)) => (name, port.parse::<u16>().map_err(|_| usage())?),
            None => (rest, 443),
        };
        if namespace.is_empty() || name.is_empty() || port == 0 {
            return Err(usage());
        }
        Ok(Self::Service {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            port,
        })
    }

    /// Checks `--webhook-url`: `https://`, a host, no user, query or
    /// fragment (the API server refuses those).
    ///
    /// # Errors
    /// A message saying what is wrong.
    pub fn parse_url(s: &str) -> Result<Self, String> {
        let rest = s.strip_prefix("https://").ok_or_else(|| {
            format!("{s:?}: the API server calls webhooks over HTTPS only; use https://HOST:PORT")
        })?;
        let host = rest.split('/').next().unwrap_or_default();
        if host.is_empty() || rest.contains(['?', '#', '@']) {
            return Err(format!(
                "{s:?}: expected https://HOST[:PORT][/PATH], without user, query or fragment"
            ));
        }
        Ok(Self::Url(s.trim_end_matches('/').to_owned()))
    }

    /// The names the operator will be reached by, for a self-signed
    /// certificate: the URL's host, or the Service's DNS names.
    pub fn host_names(&self) -> Vec<String> {
        match self {
            Self::Url(url) => {
                let authority = url
                    .trim_start_matches("https://")
                    .split('/')
                    .next()
                    .unwrap_or_default();
                let host = match authority.strip_prefix('[') {
                    // [::1]:8443
                    Some(v6) => v6.split(']').next().unwrap_or_default(),
                    None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
                };
                vec![host.to_owned()]
            }
            Self::Service {
                namespace, name, ..
            } => vec![
                format!("{name}.{namespace}.svc"),
                format!("{name}.{namespace}.svc.cluster.local"),
                format!("{name}.{namespace}"),
                name.clone(),
            ],
        }
    }
}

/// The admission webhooks' settings. Serving is off unless
/// [`Config::webhook`](crate::Config::webhook) is set.
#[derive(Clone, Debug)]
pub struct WebhookConfig {
    /// Where to serve HTTPS (`--webhook-addr`).
    pub addr: SocketAddr,
    /// `tls.crt` and `tls.key` (and `ca.crt`, if any) as a
    /// `kubernetes.io/tls` Secret mounts them; reread when they change.
    /// `None`: a self-signed certificate made at start for
    /// [`ClientConfig::host_names`].
    pub cert_dir: Option<PathBuf>,
    /// Create or update the ValidatingWebhookConfiguration and the
    /// MutatingWebhookConfiguration (server-side apply).
    pub self_register: bool,
    /// How the API server reaches the webhooks; needed to self-register
    /// and to make a certificate.
    pub client: Option<ClientConfig>,
    /// The default failure policy: the configurations' `failurePolicy`,
    /// and the policy of a plugin that declared none.
    pub failure_policy: FailurePolicy,
    /// What to do when no plugin can be asked.
    pub no_plugin: NoPlugin,
    /// The configurations' `timeoutSeconds` (1 to 30).
    pub timeout: Duration,
    /// The configurations' name (default: `kplug.<plural>.<group>`, with
    /// `.<namespace>` when the operator watches one namespace).
    pub name: Option<String>,
}

impl WebhookConfig {
    /// Serves on `addr`, with the defaults of the flags.
    pub fn new(addr: SocketAddr) -> Self {
        Self {
            addr,
            cert_dir: None,
            self_register: false,
            client: None,
            failure_policy: FailurePolicy::Fail,
            no_plugin: NoPlugin::Allow,
            timeout: Duration::from_secs(10),
            name: None,
        }
    }

    /// Checks the settings together, before anything starts.
    ///
    /// # Errors
    /// [`crate::Error::Config`] saying which flag to change.
    pub(crate) fn validate(&self, admission_call_timeout: Duration) -> Result<(), crate::Error> {
        let seconds = self.timeout.as_secs_f64();
        if !(1.0..=30.0).contains(&seconds) || self.timeout.subsec_nanos() != 0 {
            return Err(crate::Error::Config(format!(
                "--webhook-timeout {:?}: the API server accepts whole seconds from 1s to 30s",
                self.timeout
            )));
        }
        if admission_call_timeout >= self.timeout {
            return Err(crate::Error::Config(format!(
                "--admission-call-timeout {admission_call_timeout:?} must be below --webhook-timeout {:?}: the API server would give up on the webhook before the operator gives up on the plugin, and the failure policy would never be applied",
                self.timeout
            )));
        }
        if self.self_register && self.client.is_none() {
            return Err(crate::Error::Config(
                "--webhook-self-register needs to know how the API server reaches the operator: give --webhook-url https://HOST:PORT or --webhook-service NAMESPACE/NAME[:PORT]".into(),
            ));
        }
        if self.cert_dir.is_none() && self.client.is_none() {
            return Err(crate::Error::Config(
                "--webhook-addr needs a certificate: give --webhook-cert-dir (tls.crt, tls.key), or --webhook-url / --webhook-service so that the operator makes one for that name".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn services_and_urls_parse_into_the_names_a_certificate_needs() {
        let s = ClientConfig::parse_service("kplug-system/kplug-webhook").unwrap();
        assert_eq!(
            s,
            ClientConfig::Service {
                namespace: "kplug-system".into(),
                name: "kplug-webhook".into(),
                port: 443
            }
        );
        assert_eq!(s.host_names()[0], "kplug-webhook.kplug-system.svc");
        assert!(ClientConfig::parse_service("a/b:8443").is_ok());
        for bad in ["a", "/b", "a/", "a/b:x", "a/b:0"] {
            assert!(ClientConfig::parse_service(bad).is_err(), "{bad}");
        }
        let u = ClientConfig::parse_url("https://127.0.0.1:9443/").unwrap();
        assert_eq!(u, ClientConfig::Url("https://127.0.0.1:9443".into()));
        assert_eq!(u.host_names(), ["127.0.0.1"]);
        let v6 = ClientConfig::parse_url("https://[::1]:9443").unwrap();
        assert_eq!(v6.host_names(), ["::1"]);
        for bad in ["http://a:1", "https://", "https://u@h", "https://h?q"] {
            assert!(ClientConfig::parse_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn settings_that_cannot_work_are_refused() {
        let mut c = WebhookConfig::new("127.0.0.1:0".parse().unwrap());
        assert!(
            c.validate(Duration::from_secs(5)).is_err(),
            "no certificate"
        );
        c.client = Some(ClientConfig::Url("https://127.0.0.1:1".into()));
        c.validate(Duration::from_secs(5)).unwrap();
        assert!(c.validate(Duration::from_secs(10)).is_err());
        c.timeout = Duration::from_secs(31);
        assert!(c.validate(Duration::from_secs(5)).is_err());
        c.timeout = Duration::from_secs(10);
        c.client = None;
        c.cert_dir = Some("/x".into());
        c.self_register = true;
        assert!(c.validate(Duration::from_secs(5)).is_err());
    }
}
