//! A small CSV reader for scenario data files: a header row, then rows;
//! quoted fields with `""` escapes; commas; CRLF or LF.

/// Parses `text` into (columns, rows); errors name the line.
pub fn parse(text: &str) -> Result<(Vec<String>, Vec<Vec<String>>), String> {
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
        return Err(format!("line {line}: a quoted field is not closed"));
    }
    if any || !field.is_empty() || !record.is_empty() {
        record.push(field);
        records.push((line, record));
    }
    records.retain(|(_, r)| !(r.len() == 1 && r[0].trim().is_empty()));
    let mut it = records.into_iter();
    let (_, header) = it
        .next()
        .ok_or("the file is empty; it needs a header row naming the columns")?;
    let columns: Vec<String> = header.into_iter().map(|h| h.trim().to_string()).collect();
    if let Some(bad) = columns
        .iter()
        .find(|c| c.is_empty() || !c.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '-'))
    {
        return Err(format!(
            "line 1: column '{bad}' is not a name of letters, digits, _ and -"
        ));
    }
    let mut rows = Vec::new();
    for (n, r) in it {
        if r.len() != columns.len() {
            return Err(format!(
                "line {n}: {} fields, the header has {}",
                r.len(),
                columns.len()
            ));
        }
        rows.push(r);
    }
    if rows.is_empty() {
        return Err("the file has a header but no rows".to_string());
    }
    Ok((columns, rows))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_fields_and_line_endings() {
        let (c, r) = parse("email,password\r\na@x,\"p,w\"\nb@x,\"say \"\"hi\"\"\"\n").unwrap();
        assert_eq!(c, vec!["email", "password"]);
        assert_eq!(r, vec![vec!["a@x", "p,w"], vec!["b@x", "say \"hi\""]]);
        assert!(parse("a,b\n1\n").unwrap_err().contains("line 2"));
        assert!(parse("").is_err());
    }
}
