//! Where every key and value of a TOML document lies in its text: the field path at an
//! error's byte offset, and the text of a field path. Topology and scenario files both name
//! the field a serde error is about with it.

use std::ops::Range;

use serde::de::{Deserialize, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// Where every key and value of a TOML document lies in its text, to name the field at an
/// error's byte offset and to find the text of a field path.
#[derive(Debug, Default)]
pub(crate) struct SpanTree {
    entries: Vec<SpanEntry>,
}

#[derive(Debug)]
struct SpanEntry {
    segment: Segment,
    key_span: Option<Range<usize>>,
    value_span: Range<usize>,
    is_array: bool,
    children: SpanTree,
}

/// What [`SpanTree::refine`] looks for.
enum Target {
    Key(String),
    Text(String),
}

#[derive(Debug, Clone, PartialEq)]
enum Segment {
    Key(String),
    Index(usize),
}

impl SpanTree {
    /// `None` when the text cannot be read with spans (errors then name no field path).
    pub(crate) fn parse(text: &str) -> Option<SpanTree> {
        let raw = RawTree::deserialize(toml::de::Deserializer::new(text)).ok()?;
        Some(raw.into_tree())
    }

    /// The path of the innermost key or value whose text contains `offset`.
    pub(crate) fn path_at(&self, offset: usize) -> Option<String> {
        let mut best: Option<(usize, Vec<Segment>)> = None;
        let mut stack = Vec::new();
        self.search(offset, &mut stack, &mut best);
        best.map(|(_, path)| format_path(&path))
    }

    fn search(
        &self,
        offset: usize,
        path: &mut Vec<Segment>,
        best: &mut Option<(usize, Vec<Segment>)>,
    ) {
        for e in &self.entries {
            path.push(e.segment.clone());
            for span in e.key_span.iter().chain(std::iter::once(&e.value_span)) {
                let contains =
                    span.start <= offset && (offset < span.end || span.start == span.end);
                let len = span.end - span.start;
                if contains && best.as_ref().is_none_or(|(l, _)| len <= *l) {
                    *best = Some((len, path.clone()));
                }
            }
            e.children.search(offset, path, best);
            path.pop();
        }
    }

    /// A more precise path than `path` (a table) for an error raised on the whole table, as
    /// serde does for internally tagged enums such as `[generator]`: the key named by
    /// "unknown field `x`", or the value quoted by `got "..."`, when one lies inside it.
    pub(crate) fn refine(&self, path: &str, message: &str, text: &str) -> String {
        let Some(node) = self.node_at(path) else {
            return path.to_string();
        };
        let target = if let Some(i) = message.find("unknown field `") {
            backticked_after(&message[i..], "unknown field ").map(|k| Target::Key(k.to_string()))
        } else if let Some(i) = message.find("got \"") {
            message[i + 5..]
                .split('"')
                .next()
                .map(|v| Target::Text(format!("\"{v}\"")))
        } else {
            None
        };
        let mut found = Vec::new();
        match target {
            Some(t) if node.find(&t, text, &mut found) => {
                let mut segments = parse_path(path).unwrap_or_default();
                segments.extend(found.into_iter().rev());
                format_path(&segments)
            }
            _ => path.to_string(),
        }
    }

    /// The children of the entry at `path`.
    fn node_at(&self, path: &str) -> Option<&SpanTree> {
        let mut node = self;
        for seg in parse_path(path)? {
            node = &node.entries.iter().find(|e| e.segment == seg)?.children;
        }
        Some(node)
    }

    /// Depth-first search for `target`; on success `found` holds the path to it, innermost
    /// segment first.
    fn find(&self, target: &Target, text: &str, found: &mut Vec<Segment>) -> bool {
        for e in &self.entries {
            let hit = match target {
                Target::Key(k) => e.segment == Segment::Key(k.clone()),
                Target::Text(t) => {
                    e.children.entries.is_empty()
                        && text.get(e.value_span.clone()) == Some(t.as_str())
                }
            };
            if hit || e.children.find(target, text, found) {
                found.push(e.segment.clone());
                return true;
            }
        }
        false
    }

    /// The value span of a field path such as `link[3].bandwidth` (anything after a space is
    /// ignored); `None` for paths not in the text and for whole arrays (no single place).
    pub(crate) fn span_of(&self, field: &str) -> Option<Range<usize>> {
        let field = field.split(' ').next().unwrap_or("");
        let mut node = self;
        let mut found: Option<&SpanEntry> = None;
        for seg in parse_path(field)? {
            let e = node.entries.iter().find(|e| e.segment == seg)?;
            node = &e.children;
            found = Some(e);
        }
        found.filter(|e| !e.is_array).map(|e| e.value_span.clone())
    }
}

fn format_path(path: &[Segment]) -> String {
    let mut s = String::new();
    for seg in path {
        match seg {
            Segment::Key(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(k);
            }
            Segment::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

/// `link[3].bandwidth` → [Key(link), Index(3), Key(bandwidth)].
fn parse_path(field: &str) -> Option<Vec<Segment>> {
    let mut out = Vec::new();
    for part in field.split('.') {
        let (key, mut rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if key.is_empty() {
            return None;
        }
        out.push(Segment::Key(key.to_string()));
        while let Some(r) = rest.strip_prefix('[') {
            let close = r.find(']')?;
            out.push(Segment::Index(r[..close].parse().ok()?));
            rest = &r[close + 1..];
        }
        if !rest.is_empty() {
            return None;
        }
    }
    Some(out)
}

/// The names `toml` uses to hand out spans through serde (`toml::Spanned`'s protocol, from
/// `serde_spanned`). Asking for them directly, rather than through `Spanned<T>`, lets the tree
/// accept the items that have no span (implicit tables such as `defaults` in
/// `[defaults.nvlink]`) instead of failing on them.
const SPANNED_NAME: &str = "$__serde_spanned_private_Spanned";
const SPANNED_START: &str = "$__serde_spanned_private_start";
const SPANNED_END: &str = "$__serde_spanned_private_end";
const SPANNED_VALUE: &str = "$__serde_spanned_private_value";
const SPANNED_FIELDS: &[&str] = &[SPANNED_START, SPANNED_END, SPANNED_VALUE];

/// A key or value with its span when the document has one.
type Located<T> = (Option<Range<usize>>, T);

/// A TOML document read with the spans of its keys and values.
enum RawTree {
    Leaf,
    Table(Vec<(Located<String>, Located<RawTree>)>),
    Array(Vec<Located<RawTree>>),
}

impl RawTree {
    fn into_tree(self) -> SpanTree {
        let entry = |segment, key_span: Option<Range<usize>>, (span, inner): Located<RawTree>| {
            // An item without a span of its own lies where its key does.
            let value_span: Option<Range<usize>> = span.or_else(|| key_span.clone());
            SpanEntry {
                segment,
                key_span,
                value_span: value_span.unwrap_or(usize::MAX..usize::MAX),
                is_array: matches!(inner, RawTree::Array(_)),
                children: inner.into_tree(),
            }
        };
        let entries = match self {
            RawTree::Leaf => Vec::new(),
            RawTree::Table(kvs) => kvs
                .into_iter()
                .map(|((key_span, key), v)| entry(Segment::Key(key), key_span, v))
                .collect(),
            RawTree::Array(items) => items
                .into_iter()
                .enumerate()
                .map(|(i, v)| entry(Segment::Index(i), None, v))
                .collect(),
        };
        SpanTree { entries }
    }
}

impl<'de> Deserialize<'de> for RawTree {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(TreeVisitor).map(|(_, tree)| tree)
    }
}

/// Reads a key, with its span when it has one.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Located<String>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_struct(SPANNED_NAME, SPANNED_FIELDS, KeyVisitor)
    }
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Located<String>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a TOML key")
    }
    fn visit_str<E>(self, key: &str) -> Result<Self::Value, E> {
        Ok((None, key.to_string()))
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        let (span, key) = read_spanned(map, None, |m| m.next_value::<String>())?;
        Ok((Some(span), key))
    }
}

/// Reads a value, with its span when it has one.
struct ValueSeed;

impl<'de> DeserializeSeed<'de> for ValueSeed {
    type Value = Located<RawTree>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_struct(SPANNED_NAME, SPANNED_FIELDS, TreeVisitor)
    }
}

/// Reads a value without asking for its span again (the inside of a spanned value).
struct PlainValueSeed;

impl<'de> DeserializeSeed<'de> for PlainValueSeed {
    type Value = Located<RawTree>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(TreeVisitor)
    }
}

/// The rest of a span-protocol map (start, end, then the value read by `value`); `start` when
/// its first entry was already read.
fn read_spanned<'de, A: MapAccess<'de>, T>(
    mut map: A,
    mut start: Option<usize>,
    value: impl FnOnce(&mut A) -> Result<T, A::Error>,
) -> Result<(Range<usize>, T), A::Error> {
    use serde::de::Error;
    let mut end = None;
    while let Some(key) = map.next_key::<String>()? {
        match key.as_str() {
            SPANNED_START => start = Some(map.next_value::<usize>()?),
            SPANNED_END => end = Some(map.next_value::<usize>()?),
            SPANNED_VALUE => {
                let v = value(&mut map)?;
                return match (start, end) {
                    (Some(s), Some(e)) => Ok((s..e, v)),
                    _ => Err(A::Error::custom("span without start or end")),
                };
            }
            other => return Err(A::Error::custom(format!("unexpected span key {other}"))),
        }
    }
    Err(A::Error::custom("span without value"))
}

struct TreeVisitor;

impl<'de> Visitor<'de> for TreeVisitor {
    type Value = Located<RawTree>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any TOML value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok((None, RawTree::Leaf))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok((None, RawTree::Leaf))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok((None, RawTree::Leaf))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok((None, RawTree::Leaf))
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok((None, RawTree::Leaf))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let Some(first) = map.next_key_seed(KeySeed)? else {
            return Ok((None, RawTree::Table(Vec::new())));
        };
        if first.0.is_none() && first.1 == SPANNED_START {
            // A spanned value: start, end, then the value itself.
            let start = map.next_value::<usize>()?;
            let (span, (_, tree)) =
                read_spanned(map, Some(start), |m| m.next_value_seed(PlainValueSeed))?;
            return Ok((Some(span), tree));
        }
        let mut kvs = vec![(first, map.next_value_seed(ValueSeed)?)];
        while let Some(key) = map.next_key_seed(KeySeed)? {
            kvs.push((key, map.next_value_seed(ValueSeed)?));
        }
        Ok((None, RawTree::Table(kvs)))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(ValueSeed)? {
            items.push(item);
        }
        Ok((None, RawTree::Array(items)))
    }
}

/// `missing field `x`` → `x`.
pub(crate) fn backticked_after<'m>(message: &'m str, prefix: &str) -> Option<&'m str> {
    let rest = message.strip_prefix(prefix)?.strip_prefix('`')?;
    rest.split('`').next()
}
