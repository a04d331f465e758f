//! Functions of the evaluation context that replace the `cel` crate's own.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use kube_cel::cel::extractors::This;
use kube_cel::cel::{ExecutionError, FunctionContext};

/// The most patterns kept compiled per thread; past it the cache starts over.
const PATTERNS_KEPT: usize = 256;

thread_local! {
    static PATTERNS: RefCell<HashMap<String, regex::Regex>> = RefCell::new(HashMap::new());
}

/// `text.matches(pattern)`, with each pattern compiled once per thread. The
/// `cel` crate compiles the pattern at every call, which made a rule with
/// `matches()` cost three times one without; a CRD's patterns are few and
/// fixed.
pub(crate) fn matches(
    ftx: &FunctionContext<'_, '_>,
    This(text): This<Arc<String>>,
    pattern: Arc<String>,
) -> Result<bool, ExecutionError> {
    PATTERNS.with(|patterns| {
        let mut patterns = patterns.borrow_mut();
        if let Some(compiled) = patterns.get(pattern.as_str()) {
            return Ok(compiled.is_match(&text));
        }
        let compiled = regex::Regex::new(&pattern)
            .map_err(|err| ftx.error(format!("'{pattern}' not a valid regex:\n{err}")))?;
        let found = compiled.is_match(&text);
        if patterns.len() >= PATTERNS_KEPT {
            patterns.clear();
        }
        patterns.insert(pattern.to_string(), compiled);
        Ok(found)
    })
}
