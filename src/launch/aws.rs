//! Calls to AWS control-plane APIs (Batch, Auto Scaling): requests signed with AWS
//! Signature Version 4 over the HTTP client the store already uses, with credentials
//! from the same chain as the S3 store (environment, web identity, ECS task role,
//! instance profile). Why not the AWS SDK crates: docs/DECISIONS.md.
use super::LaunchError;
use crate::clock::civil_from_days;
use ring::{digest, hmac};

/// One AWS API: its SigV4 signing name, the service-specific endpoint variable of the
/// AWS SDKs, and the host prefix of its public endpoints.
pub struct Service {
    pub signing_name: &'static str,
    pub endpoint_var: &'static str,
    pub host_prefix: &'static str,
}

pub const BATCH: Service = Service {
    signing_name: "batch",
    endpoint_var: "AWS_ENDPOINT_URL_BATCH",
    host_prefix: "batch",
};

pub const AUTO_SCALING: Service = Service {
    signing_name: "autoscaling",
    endpoint_var: "AWS_ENDPOINT_URL_AUTO_SCALING",
    host_prefix: "autoscaling",
};

/// The content type of a JSON (REST) API body.
pub const JSON: &str = "application/json";
/// The content type of a Query API body (Auto Scaling, EC2).
pub const FORM: &str = "application/x-www-form-urlencoded; charset=utf-8";

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn sha256_hex(b: &[u8]) -> String {
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

/// `2026-12-01T08:30:00Z` of a Unix time in milliseconds (the form [`parse_utc`] reads).
pub fn utc_string(ms: u64) -> String {
    let (t, _) = amz_date(ms);
    format!(
        "{}-{}-{}T{}:{}:{}Z",
        &t[0..4],
        &t[4..6],
        &t[6..8],
        &t[9..11],
        &t[11..13],
        &t[13..15]
    )
}

/// Days since 1970-01-01 of a civil date (the inverse of [`civil_from_days`]).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Milliseconds since the epoch of an RFC 3339 UTC time as AWS writes it
/// (`2026-12-03T16:00:00Z`, optionally with fractional seconds); `None` otherwise.
pub fn parse_utc(s: &str) -> Option<u64> {
    let s = s.trim();
    let b = s.as_bytes();
    if b.len() < 20 || !s.ends_with('Z') || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    if !matches!(b[10], b'T' | b't' | b' ') || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = s.get(r)?;
        t.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| t.parse().ok())?
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let frac = &s[19..s.len() - 1];
    let ms = match frac.strip_prefix('.') {
        None if frac.is_empty() => 0,
        Some(f) if !f.is_empty() && f.bytes().all(|c| c.is_ascii_digit()) => {
            format!("{f:0<3}")[..3].parse::<i64>().ok()?
        }
        _ => return None,
    };
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let days = days_from_civil(y, mo, d);
    if civil_from_days(days) != (y, mo, d) {
        return None; // 2026-02-30
    }
    let t = ((days * 24 + h) * 60 + mi) * 60 + sec;
    u64::try_from(t * 1000 + ms).ok()
}

/// The SigV4 headers (`content-type`, `x-amz-date`, the token if any, `authorization`)
/// of a POST of `body` to `host` + `path` (no query string).
#[allow(clippy::too_many_arguments)]
pub fn sign_post(
    host: &str,
    path: &str,
    content_type: &str,
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

/// A Query API body: `Action`, `Version` and the parameters, form-encoded in order.
pub fn query_body(action: &str, version: &str, params: &[(String, String)]) -> Vec<u8> {
    let mut s = format!(
        "Action={}&Version={}",
        form_encode(action),
        form_encode(version)
    );
    for (k, v) in params {
        s += &format!("&{}={}", form_encode(k), form_encode(v));
    }
    s.into_bytes()
}

/// RFC 3986 percent-encoding of everything but unreserved characters (what the AWS
/// SDKs send in Query API bodies).
pub fn form_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out += &format!("%{b:02X}");
        }
    }
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
    Some(t.rsplit('#').next().unwrap_or(t).to_string())
}

/// A signed client of one AWS API in one region.
pub struct AwsApi {
    endpoint: String,
    region: String,
    service: &'static Service,
    credentials: object_store::aws::AwsCredentialProvider,
    http: reqwest::Client,
}

impl AwsApi {
    /// The region from `region`, else `AWS_REGION` / `AWS_DEFAULT_REGION`; the endpoint
    /// from the service's own variable (`AWS_ENDPOINT_URL_BATCH`, ...), then
    /// `AWS_ENDPOINT_URL`, else the region's public endpoint. `who` names the command
    /// in errors (`--backend aws-batch`).
    pub fn from_env(
        service: &'static Service,
        who: &str,
        region: Option<String>,
    ) -> Result<Self, LaunchError> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let region = region
            .or_else(|| var("AWS_REGION"))
            .or_else(|| var("AWS_DEFAULT_REGION"))
            .ok_or_else(|| {
                LaunchError::Environment(format!("{who} needs a region: set AWS_REGION"))
            })?;
        let endpoint = var(service.endpoint_var)
            .or_else(|| var("AWS_ENDPOINT_URL"))
            .unwrap_or_else(|| format!("https://{}.{region}.amazonaws.com", service.host_prefix));
        let endpoint = endpoint.trim_end_matches('/').to_string();
        // The S3 builder's credential chain, built for a placeholder bucket (no request
        // is made until a credential is asked for).
        let s3 = object_store::aws::AmazonS3Builder::from_env()
            .with_bucket_name("mdf-credentials")
            .with_region(&region)
            .build()
            .map_err(|e| LaunchError::Environment(format!("AWS credentials: {e}")))?;
        let http = reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_secs(10))
            .timeout(std::time::Duration::from_secs(60))
            .build()
            .map_err(|e| LaunchError::Environment(format!("HTTP client: {e}")))?;
        Ok(AwsApi {
            endpoint,
            region,
            service,
            credentials: s3.credentials().clone(),
            http,
        })
    }

    pub fn region(&self) -> &str {
        &self.region
    }

    /// POSTs a signed `body` to `path`; the answer's text on a 2xx status, else an
    /// [`LaunchError::Api`] naming `api` with the status and the answer.
    pub async fn post(
        &self,
        api: &'static str,
        path: &str,
        content_type: &str,
        body: Vec<u8>,
        now_ms: u64,
    ) -> Result<String, LaunchError> {
        let url = format!("{}{path}", self.endpoint);
        let parsed = reqwest::Url::parse(&url)
            .map_err(|e| LaunchError::Environment(format!("{api} endpoint {url}: {e}")))?;
        let host = match (parsed.host_str(), parsed.port()) {
            (Some(h), Some(p)) => format!("{h}:{p}"),
            (Some(h), None) => h.to_string(),
            _ => {
                return Err(LaunchError::Environment(format!(
                    "{api} endpoint {url}: no host"
                )));
            }
        };
        let c = self
            .credentials
            .get_credential()
            .await
            .map_err(|e| LaunchError::Environment(format!("AWS credentials: {e}")))?;
        let headers = sign_post(
            &host,
            parsed.path(),
            content_type,
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
        let err = |status: Option<u16>, code: Option<String>, message: String| LaunchError::Api {
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
        let text = resp.text().await.unwrap_or_default();
        if !status.is_success() {
            return Err(err(
                Some(status.as_u16()),
                error_code(&text),
                format!("failed ({status}): {text}"),
            ));
        }
        Ok(text)
    }

    /// A successful answer that does not parse (a proxy's page, another service):
    /// asking again would not help.
    pub fn bad_answer(
        &self,
        api: &'static str,
        text: &str,
        e: impl std::fmt::Display,
    ) -> LaunchError {
        LaunchError::Api {
            api,
            url: self.endpoint.clone(),
            status: Some(200),
            code: None,
            message: format!("answered {text:?}: {e}"),
        }
    }
}

impl LaunchError {
    /// The same error with `what` (the queue, the group) in front of its message.
    pub fn context(self, what: &str) -> LaunchError {
        match self {
            LaunchError::Api {
                api,
                url,
                status,
                code,
                message,
            } => LaunchError::Api {
                api,
                url,
                status,
                code,
                message: format!("{what}: {message}"),
            },
            e => e,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// A Query API request (Auto Scaling), against botocore's `SigV4Auth` on the same
    /// form body, content type, timestamp and credentials.
    #[test]
    fn query_signature_matches_botocore() {
        let body = query_body(
            "SetDesiredCapacity",
            "2011-01-01",
            &[
                ("AutoScalingGroupName".into(), "mdf-cpu".into()),
                ("DesiredCapacity".into(), "8".into()),
            ],
        );
        assert_eq!(
            std::str::from_utf8(&body).unwrap(),
            "Action=SetDesiredCapacity&Version=2011-01-01&AutoScalingGroupName=mdf-cpu&DesiredCapacity=8"
        );
        let h = sign_post(
            "autoscaling.us-east-1.amazonaws.com",
            "/",
            FORM,
            &body,
            "us-east-1",
            "autoscaling",
            "AKIDEXAMPLE",
            "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            None,
            1_796_113_800_000,
        );
        let auth = &h.iter().find(|(k, _)| k == "authorization").unwrap().1;
        assert_eq!(
            auth,
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261201/us-east-1/autoscaling/aws4_request, \
             SignedHeaders=content-type;host;x-amz-date, \
             Signature=9525a70a139d4e6c02b3a9b8b364a9132c0c33fc735de527bd7199d001b3a969"
        );
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
        assert_eq!(error_code("<html>bad gateway</html>"), None);
        assert_eq!(error_code(""), None);
    }

    #[test]
    fn form_encoding_is_rfc3986() {
        assert_eq!(
            form_encode("s3://b/mdf/jobs/cc-1 a+b~"),
            "s3%3A%2F%2Fb%2Fmdf%2Fjobs%2Fcc-1%20a%2Bb~"
        );
    }

    #[test]
    fn dates_across_leap_years() {
        assert_eq!(amz_date(0).0, "19700101T000000Z");
        assert_eq!(amz_date(951_782_400_000).1, "20000229"); // 2000-02-29
        assert_eq!(amz_date(1_709_251_199_000).0, "20240229T235959Z");
    }

    #[test]
    fn utc_times_parse_and_round_trip() {
        assert_eq!(parse_utc("2026-12-01T08:30:00Z"), Some(1_796_113_800_000));
        assert_eq!(
            parse_utc("2026-12-01T08:30:00.25Z"),
            Some(1_796_113_800_250)
        );
        assert_eq!(parse_utc("2024-02-29T23:59:59Z"), Some(1_709_251_199_000));
        assert_eq!(parse_utc("1970-01-01T00:00:00Z"), Some(0));
        for bad in [
            "",
            "2026-12-01",
            "2026-12-01T08:30:00",
            "2026-12-01T08:30:00+01:00",
            "2026-02-30T00:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-12-01T24:00:00Z",
            "2026-12-01T08:30:00.Z",
            "2026-1a-01T08:30:00Z",
            "1969-12-31T23:59:59Z",
        ] {
            assert_eq!(parse_utc(bad), None, "{bad:?}");
        }
        for ms in [0u64, 951_782_400_000, 1_796_113_800_000, 4_102_444_800_000] {
            assert_eq!(parse_utc(&utc_string(ms)), Some(ms), "{}", utc_string(ms));
        }
    }
}
