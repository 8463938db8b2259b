//! AWS Signature Version 4 and a signed client of one AWS JSON or Query API over the
//! HTTP client the store already uses, with credentials from the same chain as the S3
//! store (environment, web identity, ECS task role, instance profile). The control
//! planes (`launch`: Batch, Auto Scaling) and the Glue catalog (`io`) both call AWS
//! through it. Why not the AWS SDK crates: docs/DECISIONS.md.
use crate::clock::civil_from_days;
use ring::{digest, hmac};

/// One AWS API: its SigV4 signing name, the service-specific endpoint variable of the
/// AWS SDKs, and the host prefix of its public endpoints.
pub struct Service {
    pub signing_name: &'static str,
    pub endpoint_var: &'static str,
    pub host_prefix: &'static str,
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

pub fn sha256_hex(b: &[u8]) -> String {
    hex(digest::digest(&digest::SHA256, b).as_ref())
}

fn hmac_sha256(key: &[u8], msg: &str) -> Vec<u8> {
    hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), msg.as_bytes())
        .as_ref()
        .to_vec()
}

/// `(20261201T083000Z, 20261201)` of a Unix time in milliseconds.
pub fn amz_date(ms: u64) -> (String, String) {
    let secs = ms / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    let date = format!("{y:04}{m:02}{d:02}");
    let time = format!(
        "{date}T{:02}{:02}{:02}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    );
    (time, date)
}

/// The SigV4 headers (`content-type`, `x-amz-date`, the token if any, the `extra`
/// headers, `authorization`) of a POST of `body` to `host` + `path` (no query string).
/// `extra` names are lower case (`x-amz-target`); every header sent is signed.
#[allow(clippy::too_many_arguments)]
pub fn sign_post(
    host: &str,
    path: &str,
    content_type: &str,
    extra: &[(&str, &str)],
    body: &[u8],
    region: &str,
    service: &str,
    key_id: &str,
    secret: &str,
    token: Option<&str>,
    now_ms: u64,
) -> Vec<(String, String)> {
    let (amz, date) = amz_date(now_ms);
    let mut headers: Vec<(String, String)> = vec![
        ("content-type".into(), content_type.into()),
        ("host".into(), host.into()),
        ("x-amz-date".into(), amz.clone()),
    ];
    headers.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    if let Some(t) = token {
        headers.push(("x-amz-security-token".into(), t.into()));
    }
    headers.sort();
    let canonical_headers: String = headers.iter().map(|(k, v)| format!("{k}:{v}\n")).collect();
    let signed: Vec<&str> = headers.iter().map(|(k, _)| k.as_str()).collect();
    let signed = signed.join(";");
    let canonical = format!(
        "POST\n{path}\n\n{canonical_headers}\n{signed}\n{}",
        sha256_hex(body)
    );
    let scope = format!("{date}/{region}/{service}/aws4_request");
    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{amz}\n{scope}\n{}",
        sha256_hex(canonical.as_bytes())
    );
    let k = hmac_sha256(format!("AWS4{secret}").as_bytes(), &date);
    let k = hmac_sha256(&k, region);
    let k = hmac_sha256(&k, service);
    let k = hmac_sha256(&k, "aws4_request");
    let signature = hex(&hmac_sha256(&k, &to_sign));
    let mut out: Vec<(String, String)> = headers.into_iter().filter(|(k, _)| k != "host").collect();
    out.push((
        "authorization".into(),
        format!("AWS4-HMAC-SHA256 Credential={key_id}/{scope}, SignedHeaders={signed}, Signature={signature}"),
    ));
    out
}

/// The AWS error code of an error answer: `<Code>` of a Query API's XML, or `__type`
/// (after its last `#`) / `code` of a JSON API's body.
pub fn error_code(body: &str) -> Option<String> {
    if let Some(i) = body.find("<Code>") {
        let rest = &body[i + 6..];
        return rest.find("</Code>").map(|j| rest[..j].trim().to_string());
    }
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    let t = v
        .get("__type")
        .or_else(|| v.get("code"))
        .or_else(|| v.get("Code"))?
        .as_str()?;
    Some(bare_code(t))
}

/// `EntityNotFoundException` of `com.amazonaws.glue#EntityNotFoundException` or
/// `EntityNotFoundException:http://internal.amazon.com/...` (the JSON protocol's forms).
fn bare_code(t: &str) -> String {
    let t = t.split(':').next().unwrap_or(t);
    t.rsplit('#').next().unwrap_or(t).trim().to_string()
}

/// What a call to an AWS API can fail with.
#[derive(Debug, thiserror::Error)]
pub enum AwsError {
    /// No region, no credentials, a bad endpoint: the caller's environment.
    #[error("{0}")]
    Environment(String),
    /// The API could not be reached, or answered with an error.
    #[error("{api} at {url}: {message}")]
    Api {
        api: &'static str,
        url: String,
        /// The HTTP status, when the API answered.
        status: Option<u16>,
        /// The AWS error code of the answer (`Throttling`, `EntityNotFoundException`).
        code: Option<String>,
        message: String,
    },
}

/// A signed client of one AWS API in one region.
pub struct AwsClient {
    endpoint: String,
    region: String,
    service: &'static Service,
    credentials: object_store::aws::AwsCredentialProvider,
    http: reqwest::Client,
}

impl std::fmt::Debug for AwsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsClient")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("service", &self.service.signing_name)
            .finish()
    }
}

impl AwsClient {
    /// The region from `region`, else `AWS_REGION` / `AWS_DEFAULT_REGION`; the endpoint
    /// `endpoint`, else the service's own variable (`AWS_ENDPOINT_URL_GLUE`, ...), then
    /// `AWS_ENDPOINT_URL`, else the region's public endpoint. `who` names the caller in
    /// errors (`--backend aws-batch`, `output.iceberg.catalog`).
    pub fn from_env(
        service: &'static Service,
        who: &str,
        region: Option<String>,
        endpoint: Option<String>,
    ) -> Result<Self, AwsError> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let region = region
            .or_else(|| var("AWS_REGION"))
            .or_else(|| var("AWS_DEFAULT_REGION"))
            .ok_or_else(|| {
                AwsError::Environment(format!("{who} needs a region: set AWS_REGION"))
            })?;
        let endpoint = endpoint
            .or_else(|| var(service.endpoint_var))
            .or_else(|| var("AWS_ENDPOINT_URL"))
            .unwrap_or_else(|| {
                // The China partition's endpoints are under amazonaws.com.cn.
                let domain = if region.starts_with("cn-") {
                    "amazonaws.com.cn"
                } else {
                    "amazonaws.com"
                };
                format!("https://{}.{region}.{domain}", service.host_prefix)
            });
        let endpoint = endpoint.trim_end_matches('/').to_string();
        // The S3 builder's credential chain, built for a placeholder bucket (no request
        // is made until a credential is asked for).
        let s3 = object_store::aws::AmazonS3Builder::from_env()
            .with_bucket_name("mdf-credentials")
            .with_region(&region)
            .build()
            .map_err(|e| AwsError::Environment(format!("AWS credentials: {e}")))?;
        Self::from_parts(service, region, endpoint, s3.credentials().clone())
    }

    /// A client of `service` at `endpoint` signing with `credentials`.
    pub fn from_parts(
        service: &'static Service,
        region: String,
        endpoint: String,
        credentials: object_store::aws::AwsCredentialProvider,
    ) -> Result<Self, AwsError> {
        let http = reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_secs(10))
            .timeout(std::time::Duration::from_secs(60))
            .build()
            .map_err(|e| AwsError::Environment(format!("HTTP client: {e}")))?;
        Ok(AwsClient {
            endpoint: endpoint.trim_end_matches('/').to_string(),
            region,
            service,
            credentials,
            http,
        })
    }

    pub fn region(&self) -> &str {
        &self.region
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// POSTs a signed `body` to `path` with the `extra` headers; the answer's text on a
    /// 2xx status, else an [`AwsError::Api`] naming `api` with the status, the AWS error
    /// code and the answer.
    pub async fn post(
        &self,
        api: &'static str,
        path: &str,
        content_type: &str,
        extra: &[(&str, &str)],
        body: Vec<u8>,
        now_ms: u64,
    ) -> Result<String, AwsError> {
        let url = format!("{}{path}", self.endpoint);
        let parsed = reqwest::Url::parse(&url)
            .map_err(|e| AwsError::Environment(format!("{api} endpoint {url}: {e}")))?;
        let host = match (parsed.host_str(), parsed.port()) {
            (Some(h), Some(p)) => format!("{h}:{p}"),
            (Some(h), None) => h.to_string(),
            _ => {
                return Err(AwsError::Environment(format!(
                    "{api} endpoint {url}: no host"
                )));
            }
        };
        let c = self
            .credentials
            .get_credential()
            .await
            .map_err(|e| AwsError::Environment(format!("AWS credentials: {e}")))?;
        let headers = sign_post(
            &host,
            parsed.path(),
            content_type,
            extra,
            &body,
            &self.region,
            self.service.signing_name,
            &c.key_id,
            &c.secret_key,
            c.token.as_deref(),
            now_ms,
        );
        let mut req = self.http.post(parsed).body(body);
        for (k, v) in headers {
            req = req.header(k, v);
        }
        let err = |status: Option<u16>, code: Option<String>, message: String| AwsError::Api {
            api,
            url: url.clone(),
            status,
            code,
            message,
        };
        let resp = req
            .send()
            .await
            .map_err(|e| err(None, None, e.to_string()))?;
        let status = resp.status();
        // The JSON protocol may name the error in a header only.
        let header_code = resp
            .headers()
            .get("x-amzn-errortype")
            .and_then(|v| v.to_str().ok())
            .map(bare_code)
            .filter(|c| !c.is_empty());
        let text = match resp.text().await {
            Ok(t) => t,
            // An answer cut short: as if none came.
            Err(e) if status.is_success() => return Err(err(None, None, e.to_string())),
            Err(_) => String::new(),
        };
        if !status.is_success() {
            return Err(err(
                Some(status.as_u16()),
                header_code.or_else(|| error_code(&text)),
                format!("failed ({status}): {text}"),
            ));
        }
        Ok(text)
    }

    /// A successful answer that does not parse (a proxy's page, another service):
    /// asking again would not help.
    pub fn bad_answer(&self, api: &'static str, text: &str, e: impl std::fmt::Display) -> AwsError {
        AwsError::Api {
            api,
            url: self.endpoint.clone(),
            status: Some(200),
            code: None,
            message: format!("answered {text:?}: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const JSON: &str = "application/json";

    /// A known answer from an independent signer (botocore's `SigV4Auth` on the same
    /// request, timestamp and credentials).
    #[test]
    fn signature_matches_botocore() {
        let body = br#"{"jobName":"mdf-x","jobQueue":"q"}"#;
        // 2026-12-01T08:30:00Z
        let ms = 1_796_113_800_000;
        assert_eq!(amz_date(ms).0, "20261201T083000Z");
        let h = sign_post(
            "batch.eu-west-1.amazonaws.com",
            "/v1/submitjob",
            JSON,
            &[],
            body,
            "eu-west-1",
            "batch",
            "AKIDEXAMPLE",
            "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            Some("TOKEN123"),
            ms,
        );
        let auth = &h.iter().find(|(k, _)| k == "authorization").unwrap().1;
        assert_eq!(
            auth,
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261201/eu-west-1/batch/aws4_request, \
             SignedHeaders=content-type;host;x-amz-date;x-amz-security-token, \
             Signature=b1a296f2b87849d89ccde229d1cd74a8a4ee8b26eaacff921cfd0c73e478e698"
        );
        assert!(
            h.iter()
                .any(|(k, v)| k == "x-amz-security-token" && v == "TOKEN123")
        );
    }

    /// A Glue call: its `x-amz-target` header is signed too (botocore's `SigV4Auth`
    /// signs every header it sends but the user agent).
    #[test]
    fn target_header_is_signed_as_botocore_signs_it() {
        let h = sign_post(
            "glue.eu-west-1.amazonaws.com",
            "/",
            "application/x-amz-json-1.1",
            &[("x-amz-target", "AWSGlue.GetTable")],
            br#"{"DatabaseName":"curated","Name":"pages"}"#,
            "eu-west-1",
            "glue",
            "AKIDEXAMPLE",
            "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            Some("TOKEN123"),
            1_796_113_800_000,
        );
        let auth = &h.iter().find(|(k, _)| k == "authorization").unwrap().1;
        assert_eq!(
            auth,
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261201/eu-west-1/glue/aws4_request, \
             SignedHeaders=content-type;host;x-amz-date;x-amz-security-token;x-amz-target, \
             Signature=f1e4c1b9608f060f3ab334f959e3a5553e75a3f761160bbbabdfc7d1019313aa"
        );
        assert!(
            h.iter()
                .any(|(k, v)| k == "x-amz-target" && v == "AWSGlue.GetTable")
        );
    }

    #[test]
    fn dates_across_leap_years() {
        assert_eq!(amz_date(0).0, "19700101T000000Z");
        assert_eq!(amz_date(951_782_400_000).1, "20000229"); // 2000-02-29
        assert_eq!(amz_date(1_709_251_199_000).0, "20240229T235959Z");
    }

    #[test]
    fn error_codes_of_xml_and_json_answers() {
        let xml = r#"<ErrorResponse xmlns="http://autoscaling.amazonaws.com/doc/2011-01-01/"><Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded</Message></Error><RequestId>r</RequestId></ErrorResponse>"#;
        assert_eq!(error_code(xml).as_deref(), Some("Throttling"));
        assert_eq!(
            error_code(r#"{"__type": "com.amazon.coral#ClientException", "message": "m"}"#)
                .as_deref(),
            Some("ClientException")
        );
        assert_eq!(
            error_code(r#"{"__type": "EntityNotFoundException:http://internal.amazon.com/coral/com.amazonaws.glue/", "Message": "m"}"#)
                .as_deref(),
            Some("EntityNotFoundException")
        );
        assert_eq!(error_code("<html>bad gateway</html>"), None);
        assert_eq!(error_code(""), None);
    }
}
