use super::*;

// The tokenizer and Gopher quality rules as first written (a vector of words,
// one pass per rule): the fused versions must agree with them.
/// Word tokens: whitespace-separated, leading and trailing punctuation split off as
/// tokens of their own.
fn reference_words(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for tok in text.split_whitespace() {
        let start = tok
            .char_indices()
            .find(|&(_, c)| !is_punct(c))
            .map(|(i, _)| i);
        let Some(start) = start else {
            out.push(tok);
            continue;
        };
        let end = tok
            .char_indices()
            .rev()
            .find(|&(_, c)| !is_punct(c))
            .map(|(i, c)| i + c.len_utf8())
            .unwrap_or(tok.len());
        if start > 0 {
            out.push(&tok[..start]);
        }
        out.push(&tok[start..end]);
        if end < tok.len() {
            out.push(&tok[end..]);
        }
    }
    out
}

fn reference_gopher_quality(text: &str, q: &GopherQuality) -> Option<&'static str> {
    let words = reference_words(text);
    let n_words = words.len().max(1) as f64;
    let non_symbol: Vec<&&str> = words
        .iter()
        .filter(|w| w.chars().any(|c| !segment::symbol(c)))
        .collect();
    let n = non_symbol.len();
    if q.min_doc_words.is_some_and(|m| n < m) {
        return Some("gopher_short_doc");
    }
    if q.max_doc_words.is_some_and(|m| n > m) {
        return Some("gopher_long_doc");
    }
    let avg = non_symbol.iter().map(|w| w.chars().count()).sum::<usize>() as f64 / n.max(1) as f64;
    if q.min_avg_word_length.is_some_and(|m| avg < m) {
        return Some("gopher_below_avg_threshold");
    }
    if q.max_avg_word_length.is_some_and(|m| avg > m) {
        return Some("gopher_above_avg_threshold");
    }
    if let Some(m) = q.max_symbol_word_ratio {
        if count_byte(text, b'#') as f64 / n_words > m {
            return Some("gopher_too_many_hashes");
        }
        if (count_str(text, "...") + count_str(text, "…")) as f64 / n_words > m {
            return Some("gopher_too_many_ellipsis");
        }
    }
    let lines: Vec<&str> = segment::py_lines(text).collect();
    let n_lines = lines.len().max(1) as f64;
    if let Some(m) = q.max_bullet_lines_ratio {
        let bullets = lines.iter().filter(|l| {
            let t = l.trim_start();
            t.starts_with('•') || t.starts_with('-')
        });
        if bullets.count() as f64 / n_lines > m {
            return Some("gopher_too_many_bullets");
        }
    }
    if let Some(m) = q.max_ellipsis_lines_ratio {
        let ell = lines.iter().filter(|l| {
            let t = l.trim_end();
            t.ends_with("...") || t.ends_with('…')
        });
        if ell.count() as f64 / n_lines > m {
            return Some("gopher_too_many_end_ellipsis");
        }
    }
    if let Some(m) = q.max_non_alpha_words_ratio
        && (words
            .iter()
            .filter(|w| w.chars().any(char::is_alphabetic))
            .count() as f64
            / n_words)
            < m
    {
        return Some("gopher_below_alpha_threshold");
    }
    if let Some(m) = q.min_stop_words {
        // Distinct stop words present; stops looking once there are enough.
        let mut found = 0;
        for s in &q.stop_words {
            if found >= m {
                break;
            }
            if words.iter().any(|w| w == s) {
                found += 1;
            }
        }
        if found < m {
            return Some("gopher_enough_stop_words");
        }
    }
    None
}

#[test]
fn fused_gopher_quality_agrees_with_the_rule_by_rule_reference() {
    // Pieces that exercise every rule: punctuation around and inside words,
    // Unicode whitespace and punctuation, bullets, ellipses, hashes, digits.
    let pieces = [
        "the",
        "be",
        "to",
        "of",
        "and",
        "that",
        "have",
        "with",
        "river",
        "x",
        "—",
        "“quoted”",
        "(paren)",
        "...",
        "…",
        "#tag",
        "##",
        "- item",
        "• item",
        "123",
        "naïve",
        "word.",
        "¿qué?",
        "日本語",
        "\u{a0}",
        "\u{3000}",
        "\n",
        "\n\n",
        " ",
        "a-b",
        "'",
        "extraordinarily",
        ".,;",
        "Ünïcödé",
        "end...",
        "\t",
    ];
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    let mut next = |m: usize| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        (rng % m as u64) as usize
    };
    let variants = [
        GopherQuality::default(),
        GopherQuality {
            min_doc_words: Some(5),
            min_stop_words: Some(3),
            ..GopherQuality::default()
        },
        GopherQuality {
            min_doc_words: None,
            max_symbol_word_ratio: None,
            max_bullet_lines_ratio: Some(0.2),
            max_ellipsis_lines_ratio: Some(0.1),
            max_non_alpha_words_ratio: Some(0.95),
            ..GopherQuality::default()
        },
    ];
    let mut fired = std::collections::BTreeSet::new();
    for _ in 0..3000 {
        let len = next(160);
        let mut t = String::new();
        for _ in 0..len {
            t.push_str(pieces[next(pieces.len())]);
            if next(3) > 0 {
                t.push(' ');
            }
        }
        assert_eq!(words(&t), reference_words(&t), "{t:?}");
        for q in &variants {
            let got = gopher_quality(&t, q);
            assert_eq!(got, reference_gopher_quality(&t, q), "{t:?}");
            fired.insert(got);
        }
    }
    // The texts reached most outcomes, so the comparison covered them.
    assert!(fired.len() >= 9, "{fired:?}");
}

/// Varied English-like prose: `n` sentences of twelve pseudo-random words.
fn prose(n: usize) -> String {
    let vocab = [
        "the",
        "river",
        "of",
        "quiet",
        "mountains",
        "and",
        "that",
        "city",
        "with",
        "ancient",
        "walls",
        "have",
        "seen",
        "many",
        "travellers",
        "crossing",
        "bridges",
        "under",
        "autumn",
        "skies",
        "where",
        "merchants",
        "sold",
        "spices",
        "silver",
        "lanterns",
        "glowing",
        "evenings",
        "stories",
        "be",
        "to",
        "told",
    ];
    let mut x: u64 = 12345;
    let mut out = String::new();
    for _ in 0..n {
        let words: Vec<&str> = (0..12)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                vocab[(x >> 33) as usize % vocab.len()]
            })
            .collect();
        out += &words.join(" ");
        out += ". ";
    }
    out
}

#[test]
fn tokens_split_punctuation_like_nltk() {
    assert_eq!(
        words("Hello, world... (really)!"),
        ["Hello", ",", "world", "...", "(", "really", ")!"]
    );
}

#[test]
fn gopher_quality_rule_by_rule() {
    let q = GopherQuality::default();
    let varied = prose(60);
    assert_eq!(gopher_quality(&varied, &q), None);
    assert_eq!(
        gopher_quality("too short to keep", &q),
        Some("gopher_short_doc")
    );
    let tiny = "a b c d e f g h the of ".repeat(10);
    assert_eq!(
        gopher_quality(&tiny, &q),
        Some("gopher_below_avg_threshold")
    );
    let long = "internationalization characterization the of ".repeat(20);
    assert_eq!(
        gopher_quality(&long, &q),
        Some("gopher_above_avg_threshold")
    );
    let hashes = format!("{} {}", varied, "#tag ".repeat(120));
    assert_eq!(gopher_quality(&hashes, &q), Some("gopher_too_many_hashes"));
    let ell = format!("{varied}{}fine.", "wait... ".repeat(150));
    assert_eq!(gopher_quality(&ell, &q), Some("gopher_too_many_ellipsis"));
    let bullets: String = (0..60)
        .map(|i| format!("- item number {i} of the list\n"))
        .collect();
    assert_eq!(
        gopher_quality(&bullets, &q),
        Some("gopher_too_many_bullets")
    );
    let trailing: String = (0..60)
        .map(|i| format!("a line {i} that trails off and the rest…\n"))
        .collect();
    assert_eq!(
        gopher_quality(&trailing, &q),
        Some("gopher_too_many_end_ellipsis")
    );
    let numbers: String = (0..80)
        .map(|i| format!("{} ", 1000 + i))
        .collect::<String>()
        + "the of words here and there";
    assert_eq!(
        gopher_quality(&numbers, &q),
        Some("gopher_below_alpha_threshold")
    );
    let no_stop: String = (0..60)
        .map(|i| format!("Lorem ipsum dolor sit amet number{i}. "))
        .collect();
    assert_eq!(
        gopher_quality(&no_stop, &q),
        Some("gopher_enough_stop_words")
    );
}

#[test]
fn rolling_ngram_keys_agree_with_naive_counting() {
    // Naive: n-grams as joined strings, exactly as datatrove's loop.
    fn naive(words: &[&str], n: usize) -> usize {
        let mut seen = std::collections::HashSet::new();
        let (mut i, mut chars) = (0, 0);
        while i + n <= words.len() {
            let g = words[i..i + n].join("\u{1}");
            if seen.contains(&g) {
                chars += words[i..i + n]
                    .iter()
                    .map(|w| w.chars().count())
                    .sum::<usize>();
                i += n;
            } else {
                seen.insert(g);
                i += 1;
            }
        }
        chars
    }
    let vocab = ["a", "bb", "ccc", "dé", "e"];
    let mut x = 12345u64;
    for len in [0usize, 1, 5, 40, 400] {
        let words: Vec<&str> = random_words(&mut x, &vocab, len);
        let ids = WordIds::new(&words);
        for n in 1..=10 {
            assert_eq!(
                all_duplicate_chars(&ids, n),
                naive(&words, n),
                "len {len} n {n}"
            );
            let keys = window_keys(&ids.ids, n);
            assert_eq!(keys.len(), (len + 1).saturating_sub(n));
            for (i, k) in keys.iter().enumerate() {
                let direct = window_keys(&ids.ids[i..i + n], n)[0];
                assert_eq!(*k, direct, "rolled key equals the directly computed one");
            }
        }
    }
}

#[test]
fn gopher_repetition_rule_by_rule() {
    let r = GopherRepetition::default();
    let ok: String = prose(80).split(". ").collect::<Vec<_>>().join(".\n\n");
    assert_eq!(gopher_repetition(&ok, &r), None);
    for empty in ["", " \n\n\t "] {
        assert_eq!(gopher_repetition(empty, &r), Some("empty"), "{empty:?}");
    }
    let paras = "same paragraph here\n\n".repeat(50) + &ok;
    assert_eq!(gopher_repetition(&paras, &r), Some("dup_para_frac"));
    let lines: String = (0..20)
        .map(|i| format!("unique line {i}\nrepeated line\n"))
        .collect();
    assert_eq!(gopher_repetition(&lines, &r), Some("dup_line_frac"));
    let bigram = "buy now ".repeat(30) + &ok[..200];
    assert_eq!(gopher_repetition(&bigram, &r), Some("top_2_gram"));
    // A repeated passage too long to be a top n-gram: caught by duplicated n-grams.
    let passage = prose(3);
    let dup = format!(
        "{}{passage}{}{passage}{}",
        prose(4),
        &prose(9)[600..],
        &prose(12)[900..]
    );
    assert_eq!(
        gopher_repetition(&dup, &r).map(|x| x.starts_with("duplicated_")),
        Some(true),
        "{:?}",
        gopher_repetition(&dup, &r)
    );
}

#[test]
fn c4_rule_by_rule() {
    let c = C4::default();
    let good = "The council met on Tuesday to discuss the plan.\nIt approved the budget after a long debate.\nResidents spoke for and against it at length.\nThe work starts in spring and ends next year.\nEngineers will publish a report every month.";
    assert_eq!(c4_quality(good, &c, None).as_deref(), Ok(good));
    let noisy = format!(
        "Menu\nHome About\n{good}\nPlease enable JavaScript to view this page.\nRead our privacy policy for details.\nIt cost a lot.[12] Really.[citation needed]"
    );
    let cleaned = c4_quality(&noisy, &c, None).unwrap();
    assert!(
        cleaned.starts_with("The council") && cleaned.ends_with("It cost a lot. Really."),
        "{cleaned}"
    );
    assert_eq!(
        c4_quality("Only one sentence here is fine.", &c, None),
        Err("too_few_sentences")
    );
    assert_eq!(
        c4_quality(&format!("{good}\nLorem ipsum dolor sit amet."), &c, None),
        Err("lorem_ipsum")
    );
    assert_eq!(
        c4_quality(&format!("{good}\nfunction f() {{ return 1; }}."), &c, None),
        Err("curly_bracket")
    );
    let bad = aho_corasick::AhoCorasick::new(["budget"]).unwrap();
    assert_eq!(c4_quality(good, &c, Some(&bad)), Err("badwords"));
    let partial = aho_corasick::AhoCorasick::new(["plan"]).unwrap();
    assert!(
        c4_quality(&good.replace("plan", "planet"), &c, Some(&partial)).is_ok(),
        "whole words only"
    );
}

#[test]
fn fineweb_rule_by_rule() {
    let f = FineWeb::default();
    let ok: String = (0..10)
        .map(|i| format!("This is a reasonably long line of prose number {i}, ending well.\n"))
        .collect();
    assert_eq!(fineweb_quality(&ok, &f), None);
    assert_eq!(fineweb_quality("\n \n", &f), Some("empty"));
    let no_punct: String = (0..10)
        .map(|i| format!("a long line without any terminal punctuation {i}\n"))
        .collect();
    assert_eq!(fineweb_quality(&no_punct, &f), Some("line_punct_ratio"));
    let short: String = (0..10).map(|i| format!("Short {i}.\n")).collect();
    assert_eq!(fineweb_quality(&short, &f), Some("short_line_ratio"));
    let dup = ok.clone() + "This is a reasonably long line of prose number 1, ending well.\n";
    assert_eq!(fineweb_quality(&dup, &f), Some("char_dup_ratio"));
    let list: String = (0..10)
        .map(|i| format!("This is a longer list entry {i} that ends.\n\n\n\n"))
        .collect();
    assert_eq!(fineweb_quality(&list, &f), Some("list_ratio"));
}

/// The bound the duplicated-n-gram rules are skipped by is never below what any of
/// them counts, on sequences from heavily repeating to hardly repeating, for every
/// shortest n-gram length m and every n ≥ m (a bound below would skip a rule that
/// fires).
#[test]
fn the_repetition_bound_covers_every_longer_n_gram() {
    let vocab = vocabulary(200, 7);
    let vocab: Vec<&str> = vocab.iter().map(String::as_str).collect();
    let mut x = 99u64;
    let mut tight = 0;
    for size in [1usize, 2, 3, 5, 20, 200] {
        for len in [0usize, 3, 9, 60, 700] {
            let words = random_words(&mut x, &vocab[..size], len);
            let ids = WordIds::new(&words);
            for m in 1..=6 {
                let b = repeated_window_chars(&ids, m, None);
                for n in m..=10 {
                    let d = all_duplicate_chars(&ids, n);
                    assert!(b >= d, "size {size} len {len} m {m} n {n}: {b} < {d}");
                    tight += usize::from(b == d && d > 0);
                }
            }
        }
    }
    // Where n = m and every repeat is non-overlapping the bound is exact, so it is
    // not a loose constant.
    assert!(tight > 0);
    // A page without a repeated 5-gram has a bound of 0.
    let words: Vec<&str> = vocab[..50].to_vec();
    assert_eq!(repeated_window_chars(&WordIds::new(&words), 5, None), 0);
}

/// The top-n-gram passes that count only windows whose (n-1)-gram prefix repeats
/// find what a plain count finds (`Counter.most_common`: the largest count, first
/// seen on ties), and the bound pass pruned the same way is the bound unpruned.
#[test]
fn pruned_n_gram_passes_are_the_full_passes() {
    let vocab = vocabulary(50, 1);
    let vocab: Vec<&str> = vocab.iter().map(String::as_str).collect();
    let mut x = 7u64;
    let mut found = 0;
    for size in [1usize, 2, 3, 6, 50] {
        for len in [0usize, 1, 2, 4, 9, 60, 400] {
            let words = random_words(&mut x, &vocab[..size], len);
            let ids = WordIds::new(&words);
            let mut flags: Option<Vec<bool>> = None;
            for n in 2..=6usize {
                if ids.ids.len() < n {
                    flags = None;
                    continue;
                }
                let (at, top) = plain_top(&ids.ids, n).expect("windows");
                let keys = window_keys(&ids.ids, n);
                let (full, f_full) = top_n_gram(&ids, n, &keys, None);
                let (pruned, f_pruned) = top_n_gram(&ids, n, &keys, flags.as_deref());
                assert_eq!(full, Some((at, top)), "size {size} len {len} n {n}");
                assert_eq!(pruned, full, "size {size} len {len} n {n}");
                // Pruned windows are unique: their flags agree with the full pass's.
                assert_eq!(f_pruned, f_full, "size {size} len {len} n {n}");
                let b = repeated_window_chars(&ids, n + 1, Some(&f_full));
                assert_eq!(b, repeated_window_chars(&ids, n + 1, None));
                found += usize::from(top > 1);
                flags = Some(f_full);
            }
        }
    }
    assert!(found > 10, "the sequences repeat n-grams");
}

/// `gopher_repetition`'s n-gram rules, in any order, with gaps, repeats and a 0-gram,
/// give the verdict of a plain count: the first rule in the list whose share passes
/// its threshold (top n-grams: the most frequent, first seen on ties, times its
/// characters joined by spaces; duplicated n-grams: `all_duplicate_chars`, which the
/// pruning does not touch).
#[test]
fn repetition_verdicts_with_any_rule_lists_are_a_plain_counts() {
    let vocab = vocabulary(12, 4);
    let vocab: Vec<&str> = vocab.iter().map(String::as_str).collect();
    let top_lists: [&[usize]; 7] = [
        &[2, 3, 4],
        &[4, 3, 2],
        &[3, 2],
        &[2, 4],
        &[0, 1, 2],
        &[1, 2, 3, 4, 5],
        &[3, 3, 4],
    ];
    let dup_lists: [&[usize]; 4] = [&[5, 6, 7, 8, 9, 10], &[3, 5], &[1, 2], &[0, 4]];
    let (mut x, mut fired, mut cases) = (3u64, 0, 0);
    for size in [1usize, 2, 3, 5, 12] {
        for len in [0usize, 1, 3, 8, 40, 150] {
            let words = random_words(&mut x, &vocab[..size], len);
            let text = words.join(" ");
            if text.trim().is_empty() {
                continue;
            }
            let ids = WordIds::new(&words);
            let chars = text.chars().count() as f64;
            for tops in top_lists {
                for dups in dup_lists {
                    for frac in [0.05, 0.3, 0.6] {
                        let r = GopherRepetition {
                            dup_line_frac: None,
                            dup_para_frac: None,
                            dup_line_char_frac: None,
                            dup_para_char_frac: None,
                            top_n_grams: tops.iter().map(|&n| (n, frac)).collect(),
                            dup_n_grams: dups.iter().map(|&n| (n, frac / 2.0)).collect(),
                            words: WordSplit::Whitespace,
                        };
                        let top = |n: usize| -> Option<&'static str> {
                            if n == 0 || words.len() < n {
                                return None;
                            }
                            let (at, most) = plain_top(&words, n)?;
                            let len = words[at..at + n].join(" ").chars().count();
                            ((len * most) as f64 / chars > frac).then(|| top_name(n))
                        };
                        let want = tops.iter().find_map(|&n| top(n)).or_else(|| {
                            dups.iter().find_map(|&n| {
                                (n > 0 && all_duplicate_chars(&ids, n) as f64 / chars > frac / 2.0)
                                    .then(|| dup_name(n))
                            })
                        });
                        assert_eq!(
                            gopher_repetition(&text, &r),
                            want,
                            "{text:?} tops {tops:?} dups {dups:?} frac {frac}"
                        );
                        cases += 1;
                        fired += usize::from(want.is_some());
                    }
                }
            }
        }
    }
    assert!(
        fired > cases / 10 && fired < cases * 9 / 10,
        "{fired} of {cases}"
    );
}

/// The most frequent `n`-gram of `seq` by a plain count, as `Counter.most_common`
/// answers (the largest count, the first seen on ties): its first position and count.
fn plain_top<T: Eq + std::hash::Hash>(seq: &[T], n: usize) -> Option<(usize, usize)> {
    let mut order: Vec<&[T]> = Vec::new();
    let mut counts = std::collections::HashMap::new();
    for w in seq.windows(n) {
        let c = counts.entry(w).or_insert(0usize);
        if *c == 0 {
            order.push(w);
        }
        *c += 1;
    }
    let most = order.iter().map(|w| counts[w]).max()?;
    let first = order.iter().find(|w| counts[*w] == most)?;
    Some((seq.windows(n).position(|w| w == *first)?, most))
}

/// `n` distinct words of 1 to `lengths` letters and a number.
fn vocabulary(n: usize, lengths: usize) -> Vec<String> {
    (0..n)
        .map(|i| "w".repeat(1 + i % lengths) + &i.to_string())
        .collect()
}

/// `len` words drawn from `vocab` by a linear congruential generator seeded by `x`.
fn random_words<'a>(x: &mut u64, vocab: &[&'a str], len: usize) -> Vec<&'a str> {
    (0..len)
        .map(|_| {
            *x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            vocab[(*x >> 33) as usize % vocab.len()]
        })
        .collect()
}
