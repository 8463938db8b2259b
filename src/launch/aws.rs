//! Calls to AWS control-plane APIs (Batch, Auto Scaling): requests signed with AWS
//! Signature Version 4 over the HTTP client the store already uses, with credentials
//! from the same chain as the S3 store (environment, web identity, ECS task role,
//! instance profile). Why not the AWS SDK crates: docs/DECISIONS.md.
use super::LaunchError;
use crate::clock::civil_from_days;
pub use crate::store::aws::{AwsClient, AwsError, Service, amz_date, error_code, sign_post};

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

/// A signed client of one AWS API in one region, its errors [`LaunchError`]s.
pub struct AwsApi(AwsClient);

impl From<AwsError> for LaunchError {
    fn from(e: AwsError) -> Self {
        match e {
            AwsError::Environment(m) => LaunchError::Environment(m),
            AwsError::Api {
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
                message,
            },
        }
    }
}

impl AwsApi {
    /// See [`AwsClient::from_env`]; `who` names the command in errors
    /// (`--backend aws-batch`).
    pub fn from_env(
        service: &'static Service,
        who: &str,
        region: Option<String>,
    ) -> Result<Self, LaunchError> {
        Ok(AwsApi(AwsClient::from_env(service, who, region, None)?))
    }

    pub fn region(&self) -> &str {
        self.0.region()
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
        Ok(self
            .0
            .post(api, path, content_type, &[], body, now_ms)
            .await?)
    }

    /// A successful answer that does not parse (a proxy's page, another service):
    /// asking again would not help.
    pub fn bad_answer(
        &self,
        api: &'static str,
        text: &str,
        e: impl std::fmt::Display,
    ) -> LaunchError {
        self.0.bad_answer(api, text, e).into()
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
            &[],
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
    fn form_encoding_is_rfc3986() {
        assert_eq!(
            form_encode("s3://b/mdf/jobs/cc-1 a+b~"),
            "s3%3A%2F%2Fb%2Fmdf%2Fjobs%2Fcc-1%20a%2Bb~"
        );
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
