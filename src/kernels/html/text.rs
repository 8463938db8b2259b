//! Text into blocks: open elements, text runs, preformatted text, block flushes.
use super::*;

/// Characters dropped from extracted text: soft hyphen, zero-width space, word
/// joiner, zero-width no-break space (BOM).
pub(super) const INVISIBLE: [char; 4] = ['\u{ad}', '\u{200b}', '\u{2060}', '\u{feff}'];

/// Closes the open elements from `stack[i]` on, and the links among them.
pub(super) fn close_from(stack: &mut Vec<Elem>, i: usize, in_link: &mut usize) {
    *in_link -= stack[i..].iter().filter(|e| e.tag == TAG_A).count();
    stack.truncate(i);
}

/// Appends a text node to the current block (whose text is the tail of `text`,
/// from `cur.start`).
pub(super) fn push_text(
    cur: &mut Block,
    text: &mut String,
    raw: &str,
    link: bool,
    (boiler, hard, content, pre): (bool, bool, bool, bool),
) {
    if pre {
        push_preformatted(cur, text, raw, link, (boiler, hard, content));
        return;
    }
    let mut before = text.len();
    let newline = cur.newline && text.len() > cur.start;
    if newline {
        // A line broken by `<br>`: its trailing space goes, a newline comes.
        text.truncate(cur.start + text[cur.start..].trim_end().len());
        text.push('\n');
        before = text.len();
    }
    if !push_decoded(text, raw) {
        // Only whitespace: at most one space between the block's words.
        text.truncate(before);
        if text.len() > cur.start && !text.ends_with([' ', '\n']) {
            text.push(' ');
        }
        return;
    }
    cur.newline = false;
    if newline && text[before..].starts_with(' ') {
        text.remove(before);
    }
    note_node(cur, &text[before..], link, (boiler, hard, content));
}

/// What a text node (`node`, as appended) tells its block: link text, and the
/// boilerplate and content marks of the element it sits in.
pub(super) fn note_node(
    cur: &mut Block,
    node: &str,
    link: bool,
    (boiler, hard, content): (bool, bool, bool),
) {
    if link {
        cur.link_chars += node.trim().chars().count();
    }
    cur.boiler |= boiler;
    cur.hard |= hard;
    cur.content |= content;
}

/// [`push_text`] inside `<pre>`: entities decoded and invisible characters
/// dropped, but every space, tab and line break kept (`\r\n` as `\n`).
pub(super) fn push_preformatted(
    cur: &mut Block,
    text: &mut String,
    raw: &str,
    link: bool,
    flags: (bool, bool, bool),
) {
    if cur.newline && text.len() > cur.start {
        text.push('\n');
    }
    cur.newline = false;
    let before = text.len();
    text.extend(
        decode_entities(raw)
            .chars()
            .filter(|c| *c != '\r' && !INVISIBLE.contains(c))
            .map(|c| if c == '\u{a0}' { ' ' } else { c }),
    );
    if !text[before..].trim().is_empty() {
        note_node(cur, &text[before..], link, flags);
    }
}

/// Ends the current block: its text trimmed, kept (with the path of open elements)
/// if any is left; the next block starts at the end of the text.
pub(super) fn flush(cur: &mut Block, blocks: &mut Blocks, stack: &[Elem]) {
    let text = &mut blocks.text;
    let end = cur.start + text[cur.start..].trim_end().len();
    text.truncate(end);
    cur.start = end - text[cur.start..].trim_start().len();
    if cur.start < end {
        cur.end = end;
        let p = blocks.paths.len();
        blocks.paths.extend(stack.iter().map(|e| e.id));
        cur.path = p..blocks.paths.len();
        blocks.list.push(std::mem::replace(cur, Block::new(end)));
    } else {
        *cur = Block::new(end);
    }
}
