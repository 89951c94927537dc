//! Spin's application variables: their names, and `{{ name }}` templates in component variables.

use anyhow::{Context as _, bail};

/// Spin's rule for variable names: lower-case ASCII letters, digits and `_`, starting with a letter.
pub fn check_variable_name(name: &str) -> anyhow::Result<()> {
    let ok = name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !ok {
        bail!(
            "invalid variable name `{name}`: use lower-case letters, digits and `_`, starting with a letter"
        );
    }
    Ok(())
}

/// The application variables a `{{ name }}` template refers to.
pub fn template_references(template: &str) -> anyhow::Result<Vec<String>> {
    let mut refs = Vec::new();
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            bail!("unterminated `{{{{` in `{template}`");
        };
        let name = after[..end].trim().to_string();
        check_variable_name(&name)?;
        refs.push(name);
        rest = &after[end + 2..];
    }
    Ok(refs)
}

/// Expands `{{ name }}` references in `template` with `lookup`.
pub fn expand_template(
    template: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> anyhow::Result<String> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find("}}")
            .with_context(|| format!("unterminated `{{{{` in `{template}`"))?;
        let name = after[..end].trim();
        out.push_str(&lookup(name).with_context(|| format!("variable `{name}` has no value"))?);
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}
