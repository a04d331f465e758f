//! The names `kubectl` accepts for a kind, accepted here too: the kind
//! (`AddressableService`), its plural, singular and short names (`asvc`), any
//! of them in any case, and each qualified by the group
//! (`addressableservices.samples.knative.dev`). A name that matches nothing
//! gets the closest known name suggested.

use kinject_types::registry::CustomKind;

/// One kind of the registry, by group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KindRef {
    pub(crate) group: String,
    pub(crate) kind: String,
}

/// Every name of `kind` kubectl accepts, lower case, unqualified.
fn names_of(kind: &CustomKind) -> Vec<String> {
    let mut names = vec![kind.kind.to_lowercase(), kind.plural.clone()];
    if let Ok(crd) = kind.crd() {
        let spec_names = crd.spec.names;
        names.extend(spec_names.singular);
        names.extend(spec_names.short_names.into_iter().flatten());
    }
    names
}

/// The kind `name` stands for.
pub(crate) fn resolve(kinds: &[CustomKind], name: &str) -> Result<KindRef, String> {
    let wanted = name.to_lowercase();
    // Each kind's names once: they come from its CRD, which is built for them.
    let named: Vec<(&CustomKind, Vec<String>)> = kinds.iter().map(|kind| (kind, names_of(kind))).collect();
    let mut found: Vec<KindRef> = Vec::new();
    for (kind, names) in &named {
        let qualified = |n: &String| format!("{n}.{}", kind.group);
        if names.contains(&wanted) || names.iter().map(qualified).any(|q| q == wanted) {
            let candidate = KindRef {
                group: kind.group.clone(),
                kind: kind.kind.clone(),
            };
            if !found.contains(&candidate) {
                found.push(candidate);
            }
        }
    }
    match found.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(unknown(&named, name)),
        many => {
            let qualified: Vec<String> = many
                .iter()
                .map(|k| format!("{}.{}", k.kind.to_lowercase(), k.group))
                .collect();
            Err(format!(
                "{name} names {} kinds ({}); give the group too, as in {}",
                many.len(),
                qualified.join(", "),
                qualified[0]
            ))
        }
    }
}

/// `unknown Kind: <name>, expected one of [...]`, and the closest name when
/// one is close enough to be a typo.
fn unknown(named: &[(&CustomKind, Vec<String>)], name: &str) -> String {
    let mut known: Vec<&str> = Vec::new();
    for (kind, _) in named {
        if !known.contains(&kind.kind.as_str()) {
            known.push(&kind.kind);
        }
    }
    let listed = format!("unknown Kind: {name}, expected one of [{}]", known.join(", "));
    let wanted = name.to_lowercase();
    let closest = named
        .iter()
        .flat_map(|(kind, names)| names.iter().map(move |n| (n, kind)))
        .map(|(n, kind)| (strsim::normalized_damerau_levenshtein(&wanted, n), kind))
        .filter(|(similarity, _)| *similarity >= 0.7)
        .max_by(|a, b| a.0.total_cmp(&b.0));
    match closest {
        Some((_, kind)) => format!("{listed}; did you mean {}?", kind.kind),
        None => listed,
    }
}
