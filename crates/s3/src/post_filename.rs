//! `${filename}` in the `key` field of a browser upload (POST object): S3 replaces it with the
//! name of the uploaded file. The protocol layer does not pass that name on, so the gateway
//! replaces it in the form itself (`post_form`) before the protocol layer reads it.

use std::ops::Range;

use crate::post_form::{Form, find};

const PLACEHOLDER: &[u8] = b"${filename}";

/// The edit of the form's head that puts the uploaded file's name in place of `${filename}`
/// in the key field, or `None` when there is nothing to replace.
pub(crate) fn substitute(form: &Form) -> Option<(Range<usize>, Vec<u8>)> {
    let field = form.fields.iter().rev().find(|f| f.name == "key")?;
    let value = form.value("key")?;
    let at = field.value_at.start + find(value.as_bytes(), PLACEHOLDER)?;
    // Browsers send the base name; some old ones sent a full Windows path.
    let filename = form.file_name.rsplit(['/', '\\']).next()?;
    if filename.is_empty() {
        return None;
    }
    Some((at..at + PLACEHOLDER.len(), filename.as_bytes().to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::post_form::tests::{form_head, parsed};

    fn rewritten(key: &str, filename: &str) -> Option<Vec<u8>> {
        let form = parsed(&[("key", key), ("policy", "xyz")], filename);
        let edit = substitute(&form)?;
        Some(form.edited(vec![edit]))
    }

    #[test]
    fn the_placeholder_becomes_the_file_name() {
        let expected = form_head(&[("key", "uploads/report 1.csv"), ("policy", "xyz")], "report 1.csv");
        assert_eq!(rewritten("uploads/${filename}", "report 1.csv").unwrap(), expected);
        let windows = rewritten("u/${filename}", "C:\\Users\\me\\data.h5").unwrap();
        assert_eq!(windows, form_head(&[("key", "u/data.h5"), ("policy", "xyz")], "C:\\Users\\me\\data.h5"));
    }

    #[test]
    fn a_head_holding_the_whole_body_is_rewritten_too() {
        let mut whole = form_head(&[("key", "u/${filename}")], "a.txt");
        whole.extend_from_slice(b"file bytes\r\n--B--\r\n");
        let mut expected = form_head(&[("key", "u/a.txt")], "a.txt");
        expected.extend_from_slice(b"file bytes\r\n--B--\r\n");
        let form = Form::parse(whole, "B").unwrap();
        let edit = substitute(&form).unwrap();
        assert_eq!(form.edited(vec![edit]), expected);
    }

    #[test]
    fn forms_without_the_placeholder_are_left_alone() {
        assert_eq!(rewritten("uploads/fixed", "a.txt"), None);
    }
}
