//! What may be written into the report page: every string from a job (stage and
//! phase names, errors, crawled records) through [`esc`], every link through
//! [`safe_href`]. Nothing from a job is ever written inside `<script>` or `<style>`.

/// Escapes text for HTML text and for a double- or single-quoted attribute value.
pub(super) fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// A URL fit for an `href`, normalised the way a browser reads it (so tabs, newlines
/// and leading spaces cannot hide a `javascript:`), or `None` unless it is http(s).
/// The caller still escapes it for the attribute.
pub(super) fn safe_href(url: &str) -> Option<String> {
    let u = reqwest::Url::parse(url).ok()?;
    matches!(u.scheme(), "http" | "https").then(|| u.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_attribute_breakers_are_escaped() {
        assert_eq!(
            esc("<a href=\"x\" title='y'>&</a>"),
            "&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;&lt;/a&gt;"
        );
    }

    #[test]
    fn only_http_and_https_urls_are_hrefs() {
        for bad in [
            "javascript:alert(1)",
            "JaVaScRiPt:alert(1)",
            " javascript:alert(1)",
            "\tjava\nscript:alert(1)",
            "\u{1}javascript:alert(1)",
            "data:text/html,<script>alert(1)</script>",
            "vbscript:msgbox(1)",
            "file:///etc/passwd",
            "//evil.example/x",
            "/relative",
            "",
        ] {
            assert_eq!(safe_href(bad), None, "{bad:?}");
        }
        assert_eq!(
            safe_href(" https://example.org/a b?q=\"'<>").as_deref(),
            Some("https://example.org/a%20b?q=%22%27%3C%3E")
        );
        assert_eq!(
            safe_href("HTTP://Example.org").as_deref(),
            Some("http://example.org/")
        );
    }
}
