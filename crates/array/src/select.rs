//! Selections and threshold queries as the gateway serves them. A selection is written
//! `[start:stop:step, index, ...]` (numpy's basic slicing with positive steps; negative
//! indices count from the end; missing dimensions are whole; an index drops its dimension), a
//! threshold query is a small expression over `value` (`abs(value) > 0.5 and value < 3`).
//! Results stream slab by slab (`Slabs`), so memory stays bounded whatever the selection's size.

use std::io::Read;
use std::sync::Arc;

use crate::array::ZarrArray;
use crate::spec::DataType;
use crate::{ArrayError, Region};

/// A parsed selection: the region it reads and the dimensions an index drops.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    pub region: Region,
    /// Dimensions selected by a single index (absent from the result's shape).
    pub dropped: Vec<usize>,
}

impl Selection {
    /// The result's shape (dropped dimensions removed).
    pub fn shape(&self) -> Vec<u64> {
        (0..self.region.count.len()).filter(|d| !self.dropped.contains(d)).map(|d| self.region.count[d]).collect()
    }
}

fn bad(text: &str, why: impl std::fmt::Display) -> ArrayError {
    ArrayError::Spec(format!("selection {text:?}: {why}"))
}

/// Parses `[0:4634,100:132,200:232,0]` against an array of `shape`.
pub fn parse_selection(text: &str, shape: &[u64]) -> Result<Selection, ArrayError> {
    let inner = text.trim();
    let inner = inner.strip_prefix('[').and_then(|s| s.strip_suffix(']')).unwrap_or(inner).trim();
    let items: Vec<&str> = if inner.is_empty() { Vec::new() } else { inner.split(',').map(str::trim).collect() };
    if items.len() > shape.len() {
        return Err(bad(text, format!("{} dimensions given, the array has {}", items.len(), shape.len())));
    }
    let (mut offset, mut count, mut stride, mut dropped) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (dim, &extent) in shape.iter().enumerate() {
        let item = items.get(dim).copied().unwrap_or(":");
        let number = |s: &str| -> Result<Option<i64>, ArrayError> {
            let s = s.trim();
            if s.is_empty() {
                Ok(None)
            } else {
                s.parse().map(Some).map_err(|_| bad(text, format!("{s:?} is not an integer")))
            }
        };
        // Negative positions count from the end; slice bounds are clamped as numpy does.
        let resolve = |i: i64| if i < 0 { (extent as i64 + i).max(0) as u64 } else { (i as u64).min(extent) };
        if !item.contains(':') {
            let index = number(item)?.ok_or_else(|| bad(text, format!("dimension {dim} is empty")))?;
            let position = if index < 0 { extent as i64 + index } else { index };
            if position < 0 || position as u64 >= extent {
                return Err(bad(text, format!("index {index} is outside dimension {dim} of extent {extent}")));
            }
            offset.push(position as u64);
            count.push(1);
            stride.push(1);
            dropped.push(dim);
            continue;
        }
        let parts: Vec<&str> = item.split(':').collect();
        if parts.len() > 3 {
            return Err(bad(text, format!("{item:?} has more than start:stop:step")));
        }
        let step = match parts.get(2) {
            Some(s) => number(s)?.unwrap_or(1),
            None => 1,
        };
        if step < 1 {
            return Err(bad(text, format!("dimension {dim}: steps must be at least 1 (downsampling), not {step}")));
        }
        let start = number(parts[0])?.map_or(0, resolve);
        let stop = number(parts[1])?.map_or(extent, resolve);
        let n = if stop > start { (stop - start).div_ceil(step as u64) } else { 0 };
        offset.push(if n == 0 { 0 } else { start });
        count.push(n);
        stride.push(step as u64);
    }
    Ok(Selection { region: Region::new(offset, count).with_stride(stride), dropped })
}

/// A selection's bytes, read slab by slab along its first dimension: about `slab_bytes` (at
/// least one row, at most `SLAB_STRETCH` times `slab_bytes`) are held at a time. Implements
/// `Read`, so the gateway streams it.
pub struct Slabs {
    array: Arc<ZarrArray>,
    region: Region,
    /// The next row (along the first dimension) to read; past the last when the selection holds
    /// no element (an empty dimension after a first one of 2^50 rows left a walk of 2^34 empty
    /// slabs: the fuzz test's threshold query that never ended).
    next_row: u64,
    rows_per_slab: u64,
    row_bytes: u64,
    slab_bytes: u64,
    /// The extent along the first dimension of what is decoded at once (a chunk, or a shard's
    /// inner chunk), when the grid is regular.
    unit: Option<u64>,
    buffer: Vec<u8>,
    position: usize,
    remaining: u64,
}

/// How far a slab may grow past `slab_bytes` to end where a chunk ends. A slab that ends inside
/// a chunk leaves the next slab to decode that chunk again: EQSIM's 64-step threshold scan
/// (64 rows of 256 KiB, chunks 256 steps long) decoded each of its 64 chunks twice with 8 MiB
/// slabs. Decision: up to 4x the slab (32 MiB for the gateway's 8 MiB) to avoid that; past it a
/// chunk is decoded once per slab, as before, so memory stays bounded.
const SLAB_STRETCH: u64 = 4;

impl Slabs {
    pub fn new(array: Arc<ZarrArray>, region: Region, slab_bytes: u64) -> Result<Self, ArrayError> {
        let total = array.region_bytes(&region)? as u64;
        let rows = region.count.first().copied().unwrap_or(1).max(1);
        let next_row = if total == 0 { rows } else { 0 };
        let row_bytes = (total / rows).max(1);
        let rows_per_slab = (slab_bytes / row_bytes).max(1);
        let unit = decode_unit(&array);
        Ok(Self {
            array,
            region,
            next_row,
            rows_per_slab,
            row_bytes,
            slab_bytes,
            unit,
            buffer: Vec::new(),
            position: 0,
            remaining: total,
        })
    }

    /// How many rows the slab starting at `next_row` takes (`slab_rows`).
    fn rows_to_take(&self, rows: u64) -> u64 {
        let along = Along {
            offset: self.region.offset[0],
            step: self.region.stride.as_ref().map_or(1, |s| s[0]),
            rows,
            unit: self.unit,
        };
        slab_rows(&along, self.next_row, self.rows_per_slab, self.row_bytes, self.slab_bytes)
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// Reads the next slab now if nothing is buffered: a server calls it before it answers, so
    /// a refusal (a chunk the user may not read) becomes an error response, not a cut body.
    pub fn prefetch(&mut self) -> Result<(), ArrayError> {
        if self.position == self.buffer.len()
            && let Some(slab) = self.next_slab()
        {
            self.buffer = self.array.read_vec(&slab)?;
            self.position = 0;
        }
        Ok(())
    }

    /// The next slab's region and rows, if any.
    fn next_slab(&mut self) -> Option<Region> {
        let rows = *self.region.count.first()?;
        if self.next_row >= rows {
            return None;
        }
        let take = self.rows_to_take(rows);
        let mut slab = self.region.clone();
        let step = slab.stride.as_ref().map_or(1, |s| s[0]);
        slab.offset[0] += self.next_row * step;
        slab.count[0] = take;
        self.next_row += take;
        Some(slab)
    }

    /// Calls `f` with each slab's bytes in order.
    pub fn for_each(mut self, mut f: impl FnMut(&Region, &[u8]) -> Result<(), ArrayError>) -> Result<(), ArrayError> {
        while let Some(slab) = self.next_slab() {
            let bytes = self.array.read_vec(&slab)?;
            f(&slab, &bytes)?;
        }
        Ok(())
    }
}

impl Read for Slabs {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.position == self.buffer.len() {
            let Some(slab) = self.next_slab() else { return Ok(0) };
            self.buffer = self.array.read_vec(&slab).map_err(std::io::Error::other)?;
            self.position = 0;
        }
        let n = out.len().min(self.buffer.len() - self.position);
        out[..n].copy_from_slice(&self.buffer[self.position..self.position + n]);
        self.position += n;
        self.remaining -= n as u64;
        Ok(n)
    }
}

/// A selection along its first dimension: from `offset` every `step`, `rows` rows, in an array
/// decoded `unit` rows at a time (`None`: unknown).
struct Along {
    offset: u64,
    step: u64,
    rows: u64,
    unit: Option<u64>,
}

/// How many rows the slab starting at row `next` takes: `rows_per_slab`, stretched to the end
/// of the chunk it would cut (within `SLAB_STRETCH` times `slab_bytes`), else cut back to that
/// chunk's start, so that no chunk is decoded by two slabs when it can be avoided.
/// Offsets, steps and chunk sizes come from a `zarr.json` and a request: the arithmetic
/// saturates, and a slab always takes at least one row and at most the rows left (a slab of no
/// rows would make the walk loop forever). A slab is cut back only when at least half of it is
/// left, so every slab but the last holds half of `rows_per_slab` or more and a walk takes at
/// most about twice the slabs its bytes need (hostile strides and chunk sizes that cut each slab
/// to a row made a 1 MiB selection walk a million slabs).
fn slab_rows(along: &Along, next: u64, rows_per_slab: u64, row_bytes: u64, slab_bytes: u64) -> u64 {
    let left = along.rows - next;
    let take = rows_per_slab.clamp(1, left);
    let end = next + take;
    let Some(unit) = along.unit.filter(|_| end < along.rows) else { return take };
    let unit_of = |row: u64| along.offset.saturating_add(row.saturating_mul(along.step)) / unit;
    let cut = unit_of(end - 1);
    if unit_of(end) != cut {
        return take;
    }
    // The first row past the chunk `cut`, and its first row.
    let row_of = |element: u64| element.saturating_sub(along.offset).div_ceil(along.step);
    let chunk_end = row_of(cut.saturating_add(1).saturating_mul(unit)).min(along.rows);
    let chunk_start = row_of(cut.saturating_mul(unit));
    // Saturated arithmetic (hostile steps) can put the "chunk end" before the slab's end: only
    // a real stretch counts.
    let stretched = if chunk_end >= end
        && (chunk_end - next).saturating_mul(row_bytes) <= slab_bytes.saturating_mul(SLAB_STRETCH)
    {
        chunk_end - next
    } else if chunk_start > next && (chunk_start - next).saturating_mul(2) >= take {
        chunk_start - next
    } else {
        take
    };
    stretched.clamp(1, left)
}

/// The extent along the first dimension of what a read decodes at once: a shard's inner chunk
/// (`chunk_reads` decodes those one by one), else a chunk; `None` for an irregular grid.
fn decode_unit(array: &ZarrArray) -> Option<u64> {
    use zarrs::array::ArrayShardedExt;
    let inner = array.inner();
    let shape = match inner.effective_subchunk_shape().filter(|_| inner.is_exclusively_sharded()) {
        Some(shape) => shape.iter().map(|n| n.get()).collect(),
        None => array.chunk_shape(),
    };
    shape.first().copied().filter(|&n| n > 0)
}

/// The `.npy` header (format 1.0) of a C-ordered array of `data_type` and `shape`.
pub fn npy_header(data_type: DataType, shape: &[u64]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    let shape = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut dict = format!("{{'descr': '{}', 'fortran_order': False, 'shape': {shape}, }}", data_type.numpy());
    // Magic (6) + version (2) + length (2) + dict + newline, padded to a multiple of 64.
    let unpadded = 10 + dict.len() + 1;
    dict.push_str(&" ".repeat(unpadded.next_multiple_of(64) - unpadded));
    dict.push('\n');
    let mut header = b"\x93NUMPY\x01\x00".to_vec();
    header.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    header.extend_from_slice(dict.as_bytes());
    header
}

/// A threshold expression over an element's `value`.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Value,
    Number(f64),
    Abs(Box<Expr>),
    Compare(Box<Expr>, Comparison, Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparison {
    Less,
    LessEqual,
    Greater,
    GreaterEqual,
    Equal,
    NotEqual,
}

impl Expr {
    /// Parses `abs(value) > 0.5 and (value < 3 or not value == 1)`.
    pub fn parse(text: &str) -> Result<Expr, ArrayError> {
        let tokens = tokenize(text)?;
        // Parsing, evaluating and dropping an expression recurse on its depth: a request's
        // expression is bounded so that none can exhaust a worker's stack.
        if tokens.len() > MAX_EXPR_TOKENS {
            return Err(ArrayError::Spec(format!(
                "the where expression has {} tokens; at most {MAX_EXPR_TOKENS} are accepted",
                tokens.len()
            )));
        }
        let mut parser = Parser { tokens, position: 0, text, depth: 0 };
        let expr = parser.or()?;
        if parser.position != parser.tokens.len() {
            return Err(parser.error("unexpected text after the expression"));
        }
        if !expr.is_condition() {
            return Err(parser.error("the expression must be a comparison (e.g. value > 0.5)"));
        }
        Ok(expr)
    }

    fn is_condition(&self) -> bool {
        matches!(self, Expr::Compare(..) | Expr::And(..) | Expr::Or(..) | Expr::Not(..))
    }

    fn number(&self, value: f64) -> f64 {
        match self {
            Expr::Value => value,
            Expr::Number(n) => *n,
            Expr::Abs(e) => e.number(value).abs(),
            condition => f64::from(u8::from(condition.holds(value))),
        }
    }

    /// Whether `value` matches.
    pub fn holds(&self, value: f64) -> bool {
        match self {
            Expr::Compare(a, op, b) => {
                let (a, b) = (a.number(value), b.number(value));
                match op {
                    Comparison::Less => a < b,
                    Comparison::LessEqual => a <= b,
                    Comparison::Greater => a > b,
                    Comparison::GreaterEqual => a >= b,
                    Comparison::Equal => a == b,
                    Comparison::NotEqual => a != b,
                }
            }
            Expr::And(a, b) => a.holds(value) && b.holds(value),
            Expr::Or(a, b) => a.holds(value) || b.holds(value),
            Expr::Not(a) => !a.holds(value),
            other => other.number(value) != 0.0,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Word(String),
    Number(f64),
    Op(&'static str),
    Open,
    Close,
}

fn tokenize(text: &str) -> Result<Vec<Token>, ArrayError> {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '(' || c == ')' {
            tokens.push(if c == '(' { Token::Open } else { Token::Close });
            i += 1;
        } else if c.is_ascii_digit()
            || c == '.'
            || (c == '-' && chars.get(i + 1).is_some_and(|n| n.is_ascii_digit() || *n == '.'))
        {
            let start = i;
            i += 1;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric()
                    || chars[i] == '.'
                    || ((chars[i] == '-' || chars[i] == '+') && matches!(chars[i - 1], 'e' | 'E')))
            {
                i += 1;
            }
            let literal: String = chars[start..i].iter().collect();
            let number = literal
                .parse()
                .map_err(|_| ArrayError::Spec(format!("where {text:?}: {literal:?} is not a number")))?;
            tokens.push(Token::Number(number));
        } else if c.is_ascii_alphabetic() {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            tokens.push(Token::Word(chars[start..i].iter().collect::<String>().to_ascii_lowercase()));
        } else {
            let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
            let op = ["<=", ">=", "==", "!=", "&&", "||"].into_iter().find(|op| *op == two);
            let (op, len) = match op {
                Some(op) => (op, 2),
                None => match c {
                    '<' => ("<", 1),
                    '>' => (">", 1),
                    '=' => ("==", 1),
                    '!' => ("!", 1),
                    _ => return Err(ArrayError::Spec(format!("where {text:?}: unexpected {c:?}"))),
                },
            };
            tokens.push(Token::Op(op));
            i += len;
        }
    }
    Ok(tokens)
}

/// The most tokens a `where` expression may have, and the deepest it may nest (parentheses,
/// `abs`, `not`).
const MAX_EXPR_TOKENS: usize = 1024;
const MAX_EXPR_DEPTH: usize = 32;

struct Parser<'a> {
    tokens: Vec<Token>,
    position: usize,
    text: &'a str,
    /// How deep the parser is in nested expressions now.
    depth: usize,
}

impl Parser<'_> {
    fn error(&self, why: &str) -> ArrayError {
        let shown: String = self.text.chars().take(200).collect();
        ArrayError::Spec(format!(
            "where {shown:?}: {why}; the language: value, numbers, abs(...), < <= > >= == !=, and, or, not, parentheses"
        ))
    }

    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.position)
    }

    fn is_word(&self, word: &str) -> bool {
        matches!(self.peek(), Some(Token::Word(w)) if w == word)
    }

    fn or(&mut self) -> Result<Expr, ArrayError> {
        let mut left = self.and()?;
        while self.is_word("or") || self.peek() == Some(&Token::Op("||")) {
            self.position += 1;
            left = Expr::Or(Box::new(left), Box::new(self.and()?));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Expr, ArrayError> {
        let mut left = self.not()?;
        while self.is_word("and") || self.peek() == Some(&Token::Op("&&")) {
            self.position += 1;
            left = Expr::And(Box::new(left), Box::new(self.not()?));
        }
        Ok(left)
    }

    fn not(&mut self) -> Result<Expr, ArrayError> {
        if self.is_word("not") || self.peek() == Some(&Token::Op("!")) {
            self.position += 1;
            let inner = self.nested(Self::not)?;
            return Ok(Expr::Not(Box::new(inner)));
        }
        self.comparison()
    }

    /// `parse` one level deeper, refused past `MAX_EXPR_DEPTH`.
    fn nested(&mut self, parse: fn(&mut Self) -> Result<Expr, ArrayError>) -> Result<Expr, ArrayError> {
        if self.depth >= MAX_EXPR_DEPTH {
            return Err(self.error(&format!("the expression nests deeper than {MAX_EXPR_DEPTH}")));
        }
        self.depth += 1;
        let parsed = parse(self);
        self.depth -= 1;
        parsed
    }

    fn comparison(&mut self) -> Result<Expr, ArrayError> {
        let left = self.operand()?;
        let op = match self.peek() {
            Some(Token::Op("<")) => Comparison::Less,
            Some(Token::Op("<=")) => Comparison::LessEqual,
            Some(Token::Op(">")) => Comparison::Greater,
            Some(Token::Op(">=")) => Comparison::GreaterEqual,
            Some(Token::Op("==")) => Comparison::Equal,
            Some(Token::Op("!=")) => Comparison::NotEqual,
            _ => return Ok(left),
        };
        self.position += 1;
        Ok(Expr::Compare(Box::new(left), op, Box::new(self.operand()?)))
    }

    fn operand(&mut self) -> Result<Expr, ArrayError> {
        let token = self.peek().cloned().ok_or_else(|| self.error("the expression ends early"))?;
        self.position += 1;
        match token {
            Token::Number(n) => Ok(Expr::Number(n)),
            Token::Word(w) if w == "value" => Ok(Expr::Value),
            Token::Word(w) if w == "abs" => {
                if self.peek() != Some(&Token::Open) {
                    return Err(self.error("abs needs parentheses"));
                }
                self.position += 1;
                let inner = self.nested(Self::or)?;
                self.close()?;
                Ok(Expr::Abs(Box::new(inner)))
            }
            Token::Open => {
                let inner = self.nested(Self::or)?;
                self.close()?;
                Ok(inner)
            }
            other => Err(self.error(&format!("unexpected {other:?}"))),
        }
    }

    fn close(&mut self) -> Result<(), ArrayError> {
        if self.peek() != Some(&Token::Close) {
            return Err(self.error("a parenthesis is not closed"));
        }
        self.position += 1;
        Ok(())
    }
}

/// The elements of `selection` matching `expr`, in C order from element `after` (of the
/// selection, 0 = its first), at most `limit`: their coordinates in the array, their values,
/// and where to continue (`None` when the selection is exhausted).
pub struct Matches {
    pub coordinates: Vec<Vec<u64>>,
    pub values: Vec<f64>,
    pub next: Option<u64>,
}

/// Scans `selection` of `array` slab by slab (bounded memory) for elements matching `expr`.
pub fn find(
    array: &Arc<ZarrArray>,
    selection: &Selection,
    expr: &Expr,
    after: u64,
    limit: usize,
    slab_bytes: u64,
) -> Result<Matches, ArrayError> {
    let data_type = array.data_type();
    let region = &selection.region;
    let dims = region.count.len();
    let step: Vec<u64> = (0..dims).map(|d| region.stride.as_ref().map_or(1, |s| s[d])).collect();
    let mut matches = Matches { coordinates: Vec::new(), values: Vec::new(), next: None };
    let mut seen = 0u64; // elements of the selection passed so far
    let stop = "enough matches";
    // The matches of one slab whose first element is element `seen` of the selection.
    let mut scan = |slab: &Region, bytes: &[u8], seen: u64| -> Result<(), ArrayError> {
        let elements = bytes.len() / data_type.size();
        for i in 0..elements {
            let index = seen + i as u64;
            if index < after {
                continue;
            }
            let value = data_type.value_at(bytes, i);
            if !expr.holds(value) {
                continue;
            }
            if matches.values.len() == limit {
                matches.next = Some(index);
                return Err(ArrayError::Spec(stop.into()));
            }
            // The element's position in the slab (C order), then in the array.
            let mut rest = i as u64;
            let mut coordinate = vec![0u64; dims];
            for d in (0..dims).rev() {
                coordinate[d] = slab.offset[d] + (rest % slab.count[d]) * step[d];
                rest /= slab.count[d];
            }
            matches.coordinates.push(coordinate);
            matches.values.push(value);
        }
        Ok(())
    };
    let mut slabs = Slabs::new(array.clone(), region.clone(), slab_bytes)?;
    let mut outcome = Ok(());
    while let Some(slab) = slabs.next_slab() {
        let elements: u64 = slab.count.iter().product();
        // Slabs wholly before `after` (the pages already answered) are skipped unread.
        if seen + elements > after {
            outcome = array.read_vec(&slab).and_then(|bytes| scan(&slab, &bytes, seen));
            if outcome.is_err() {
                break;
            }
        }
        seen += elements;
    }
    match outcome {
        Err(ArrayError::Spec(why)) if why == stop => Ok(matches),
        other => other.map(|()| matches),
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn every_slab_takes_at_least_a_row_and_never_more_than_are_left() {
        // Hostile offsets, steps and chunk sizes from a zarr.json and a selection: the slab
        // walk must always make progress (a slab of 0 rows looped forever).
        let big = [0, 1, 3, 1 << 32, 1 << 62, u64::MAX / 2, u64::MAX - 1, u64::MAX];
        for offset in big {
            for step in [1, 2, 7, 1 << 32, 1 << 63, u64::MAX] {
                for unit in [None, Some(1), Some(3), Some(1 << 40), Some(u64::MAX)] {
                    for rows in [1, 2, 5, 1000] {
                        let along = Along { offset, step, rows, unit };
                        for next in 0..rows.min(4) {
                            for per_slab in [1, 2, 64] {
                                let take = slab_rows(&along, next, per_slab, 8, 64);
                                assert!(
                                    (1..=rows - next).contains(&take),
                                    "offset {offset} step {step} unit {unit:?} rows {rows} next {next}: {take}"
                                );
                                // Never cut to less than half a slab, but at the end.
                                assert!(
                                    take * 2 >= per_slab.min(rows - next),
                                    "offset {offset} step {step} unit {unit:?} rows {rows} next {next}: {take}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    use super::*;

    #[test]
    fn selections_parse_like_numpy_basic_slicing() {
        let s = parse_selection("[0:4634,100:132,200:232,0]", &[5000, 400, 400, 1]).unwrap();
        assert_eq!(s.region.offset, vec![0, 100, 200, 0]);
        assert_eq!(s.region.count, vec![4634, 32, 32, 1]);
        assert_eq!(s.dropped, vec![3]);
        assert_eq!(s.shape(), vec![4634, 32, 32]);
        let s = parse_selection("[::200, -5:, 3]", &[1000, 10, 8]).unwrap();
        assert_eq!((s.region.offset.clone(), s.region.count.clone()), (vec![0, 5, 3], vec![5, 5, 1]));
        assert_eq!(s.region.stride, Some(vec![200, 1, 1]));
        assert_eq!(parse_selection("[]", &[4, 4]).unwrap().region.count, vec![4, 4]);
        assert_eq!(parse_selection("[5:2]", &[10]).unwrap().region.count, vec![0]);
        for bad in ["[0:1:0]", "[0:1:-1]", "[10]", "[-11]", "[a]", "[1,2,3]", "[1:2:3:4]"] {
            assert!(parse_selection(bad, &[10, 10]).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn threshold_expressions_evaluate_with_precedence() {
        let e = Expr::parse("abs(value) > 0.5 and value < 3 or value == -10").unwrap();
        assert!(e.holds(1.0) && e.holds(-0.7) && e.holds(-10.0));
        assert!(!e.holds(0.2) && !e.holds(3.5));
        let e = Expr::parse("not (value >= 1e-3) && value != -2.5E0").unwrap();
        assert!(e.holds(0.0) && !e.holds(-2.5) && !e.holds(0.01));
        for bad in ["value", "abs value > 1", "value > ", "(value > 1", "value > 1 1", "value ~ 1"] {
            assert!(Expr::parse(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn expressions_deep_or_long_enough_to_exhaust_a_stack_are_refused() {
        // Before the bounds, 8000 parentheses overflowed a 2 MiB worker stack (the process died).
        let deep = format!("{}value > 0{}", "(".repeat(8000), ")".repeat(8000));
        assert!(Expr::parse(&deep).is_err());
        let deep = format!("{}value > 0{}", "(".repeat(400), ")".repeat(400));
        assert!(matches!(Expr::parse(&deep), Err(ArrayError::Spec(why)) if why.contains("nests deeper")));
        let nots = format!("{}value > 0", "!".repeat(MAX_EXPR_DEPTH + 1));
        assert!(Expr::parse(&nots).is_err());
        let long = vec!["value > 0"; MAX_EXPR_TOKENS].join(" or ");
        assert!(matches!(Expr::parse(&long), Err(ArrayError::Spec(why)) if why.contains("tokens")));
        let nested = format!("{}abs(value) > 0{}", "(".repeat(MAX_EXPR_DEPTH - 1), ")".repeat(MAX_EXPR_DEPTH - 1));
        assert!(Expr::parse(&nested).unwrap().holds(1.0));
    }

    #[test]
    fn slabs_end_where_chunks_end() {
        let along = |offset, step, rows, unit| Along { offset, step, rows, unit };
        // EQSIM's threshold scan: rows 1024..1088 of chunks 256 rows long, 8 MiB slabs of
        // 256 KiB rows (32 rows): one slab of 64 rows (16 MiB), not two that decode the same chunks.
        assert_eq!(slab_rows(&along(1024, 1, 64, Some(256)), 0, 32, 256 << 10, 8 << 20), 64);
        // Without a known chunk, or ending at a chunk's end, the slab is as asked.
        assert_eq!(slab_rows(&along(1024, 1, 64, None), 0, 32, 256 << 10, 8 << 20), 32);
        assert_eq!(slab_rows(&along(0, 1, 64, Some(32)), 0, 32, 1, 32), 32);
        // A chunk within 4 slabs' bytes is stretched to; one past them (rows 400..549 cut the
        // chunk 500..1000, whose end is 600 rows > 4 x 140 bytes away): cut back to its start...
        assert_eq!(slab_rows(&along(0, 1, 1000, Some(100)), 0, 150, 1, 150), 200);
        assert_eq!(slab_rows(&along(400, 1, 1000, Some(500)), 0, 150, 1, 140), 100);
        // ...unless the slab starts in that chunk: then it is cut where asked.
        assert_eq!(slab_rows(&along(0, 1, 1000, Some(1000)), 0, 150, 1, 150), 150);
        // Strided rows: rows k at 10 + 7k, chunks of 50; 5 rows reach 38, the chunk ends after row 5.
        assert_eq!(slab_rows(&along(10, 7, 100, Some(50)), 0, 5, 1, 5), 6);
        // The last slab takes what is left.
        assert_eq!(slab_rows(&along(0, 1, 10, Some(4)), 8, 5, 1, 5), 2);
    }

    #[test]
    fn npy_headers_are_aligned_and_describe_the_array() {
        let header = npy_header(DataType::Float32, &[3, 4]);
        assert_eq!(header.len() % 64, 0);
        let text = String::from_utf8_lossy(&header[10..]);
        assert!(text.contains("'descr': '<f4'") && text.contains("'shape': (3, 4)"), "{text}");
        assert!(String::from_utf8_lossy(&npy_header(DataType::UInt8, &[7])).contains("(7,)"));
    }
}
