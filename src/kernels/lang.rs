//! Language identification (whatlang: character trigrams and scripts, 70 languages,
//! no model files) with ISO 639-1 codes and a confidence score in [0, 1].
use rayon::prelude::*;
use whatlang::Lang;

/// ISO 639-1 code of a whatlang language.
pub fn iso639_1(l: Lang) -> &'static str {
    use Lang::*;
    match l {
        Epo => "eo",
        Eng => "en",
        Rus => "ru",
        Cmn => "zh",
        Spa => "es",
        Por => "pt",
        Ita => "it",
        Ben => "bn",
        Fra => "fr",
        Deu => "de",
        Ukr => "uk",
        Kat => "ka",
        Ara => "ar",
        Hin => "hi",
        Jpn => "ja",
        Heb => "he",
        Yid => "yi",
        Pol => "pl",
        Amh => "am",
        Jav => "jv",
        Kor => "ko",
        Nob => "nb",
        Dan => "da",
        Swe => "sv",
        Fin => "fi",
        Tur => "tr",
        Nld => "nl",
        Hun => "hu",
        Ces => "cs",
        Ell => "el",
        Bul => "bg",
        Bel => "be",
        Mar => "mr",
        Kan => "kn",
        Ron => "ro",
        Slv => "sl",
        Hrv => "hr",
        Srp => "sr",
        Mkd => "mk",
        Lit => "lt",
        Lav => "lv",
        Est => "et",
        Tam => "ta",
        Vie => "vi",
        Urd => "ur",
        Tha => "th",
        Guj => "gu",
        Uzb => "uz",
        Pan => "pa",
        Aze => "az",
        Ind => "id",
        Tel => "te",
        Pes => "fa",
        Mal => "ml",
        Ori => "or",
        Mya => "my",
        Nep => "ne",
        Sin => "si",
        Khm => "km",
        Tuk => "tk",
        Aka => "ak",
        Zul => "zu",
        Sna => "sn",
        Afr => "af",
        Lat => "la",
        Slk => "sk",
        Cat => "ca",
        Tgl => "tl",
        Hye => "hy",
        Cym => "cy",
    }
}

/// Every code `identify` can return.
pub fn known_codes() -> Vec<&'static str> {
    Lang::all().iter().map(|&l| iso639_1(l)).collect()
}

/// Detection considers at most this many bytes of a document (its beginning).
const MAX_BYTES: usize = 2048;

/// The language of a text and the detector's confidence; `None` when undetectable.
pub fn identify(text: &str) -> Option<(&'static str, f64)> {
    let mut end = text.len().min(MAX_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    whatlang::detect(&text[..end]).map(|i| (iso639_1(i.lang()), i.confidence()))
}

pub fn identify_all(texts: &[Option<&str>]) -> Vec<Option<(&'static str, f64)>> {
    if texts.len() < 256 {
        texts.iter().map(|t| t.and_then(identify)).collect()
    } else {
        texts.par_iter().map(|t| t.and_then(identify)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifies_common_languages() {
        assert_eq!(
            identify("The quick brown fox jumps over the lazy dog and runs away into the forest.")
                .map(|x| x.0),
            Some("en")
        );
        assert_eq!(
            identify(
                "Der schnelle braune Fuchs springt über den faulen Hund und läuft in den Wald."
            )
            .map(|x| x.0),
            Some("de")
        );
        assert_eq!(
            identify("Быстрая коричневая лиса прыгает через ленивую собаку.").map(|x| x.0),
            Some("ru")
        );
        assert_eq!(identify("").map(|x| x.0), None);
        assert_eq!(known_codes().len(), 70);
    }
}
