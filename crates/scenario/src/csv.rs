//! A small CSV reader for scenario data files: a header row, then rows;
//! quoted fields with `""` escapes; commas; CRLF or LF.

/// Parses `text` into (columns, rows); errors name the line.
pub fn parse(text: &str) -> Result<(Vec<String>, Vec<Vec<String>>), CsvError> {
    let mut records = Vec::new();
    let mut field = String::new();
    let mut record: Vec<String> = Vec::new();
    let mut quoted = false;
    let mut line = 1;
    let mut chars = text.chars().peekable();
    let mut any = false;
    while let Some(c) = chars.next() {
        any = true;
        if quoted {
            match c {
                '"' if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                '"' => quoted = false,
                '\n' => {
                    line += 1;
                    field.push(c);
                }
                _ => field.push(c),
            }
            continue;
        }
        match c {
            '"' if field.is_empty() => quoted = true,
            ',' => record.push(std::mem::take(&mut field)),
            '\r' => {}
            '\n' => {
                record.push(std::mem::take(&mut field));
                records.push((line, std::mem::take(&mut record)));
                line += 1;
                any = false;
            }
            _ => field.push(c),
        }
    }
    if quoted {
        return Err(CsvError::Unclosed { line });
    }
    if any || !field.is_empty() || !record.is_empty() {
        record.push(field);
        records.push((line, record));
    }
    records.retain(|(_, r)| !(r.len() == 1 && r[0].trim().is_empty()));
    let mut it = records.into_iter();
    let (_, header) = it.next().ok_or(CsvError::Empty)?;
    let columns: Vec<String> = header.into_iter().map(|h| h.trim().to_string()).collect();
    if let Some(bad) = columns
        .iter()
        .find(|c| c.is_empty() || !c.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '-'))
    {
        return Err(CsvError::BadColumn { name: bad.clone() });
    }
    let mut rows = Vec::new();
    for (n, r) in it {
        if r.len() != columns.len() {
            return Err(CsvError::Fields {
                line: n,
                fields: r.len(),
                columns: columns.len(),
            });
        }
        rows.push(r);
    }
    if rows.is_empty() {
        return Err(CsvError::NoRows);
    }
    Ok((columns, rows))
}

/// Why a data file is not the CSV a scenario reads (the line, from 1,
/// where one is at fault).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CsvError {
    /// A quoted field runs to the end of the file.
    #[error("line {line}: a quoted field is not closed")]
    Unclosed {
        /// The line the file ends on.
        line: usize,
    },
    /// No header row.
    #[error("the file is empty; it needs a header row naming the columns")]
    Empty,
    /// A header name that is empty or not letters, digits, `_` and `-`.
    #[error("line 1: column '{name}' is not a name of letters, digits, _ and -")]
    BadColumn {
        /// The name as written (trimmed).
        name: String,
    },
    /// A row with more or fewer fields than the header.
    #[error("line {line}: {fields} fields, the header has {columns}")]
    Fields {
        /// The row's line.
        line: usize,
        /// Its fields.
        fields: usize,
        /// The header's columns.
        columns: usize,
    },
    /// A header and nothing after it.
    #[error("the file has a header but no rows")]
    NoRows,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_fields_and_line_endings() {
        let (c, r) = parse("email,password\r\na@x,\"p,w\"\nb@x,\"say \"\"hi\"\"\"\n").unwrap();
        assert_eq!(c, vec!["email", "password"]);
        assert_eq!(r, vec![vec!["a@x", "p,w"], vec!["b@x", "say \"hi\""]]);
        assert_eq!(
            parse("a,b\n1\n").unwrap_err().to_string(),
            "line 2: 1 fields, the header has 2"
        );
        assert_eq!(
            parse("").unwrap_err().to_string(),
            "the file is empty; it needs a header row naming the columns"
        );
        assert_eq!(
            parse("a\n\"x\n").unwrap_err().to_string(),
            "line 3: a quoted field is not closed"
        );
        assert_eq!(
            parse("a,b c\n1,2\n").unwrap_err().to_string(),
            "line 1: column 'b c' is not a name of letters, digits, _ and -"
        );
        assert_eq!(
            parse("a\n").unwrap_err().to_string(),
            "the file has a header but no rows"
        );
    }
}
