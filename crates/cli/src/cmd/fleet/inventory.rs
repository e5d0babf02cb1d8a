//! The hosts of `fleet --inventory FILE`: a plain list, an Ansible INI inventory or an
//! Ansible YAML inventory, each host once, in file order.

use std::collections::HashSet;

use yaml_rust2::{Yaml, YamlLoader};

/// Why an inventory names no host.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum InventoryError {
    #[error("not YAML: {0}")]
    Yaml(String),
    #[error(
        "a YAML inventory is a mapping of groups, each with `hosts:` and `children:` \
         mappings; found {0}"
    )]
    Shape(&'static str),
}

/// The hosts `text` names: YAML when it reads as an Ansible YAML inventory (a `---`
/// start, or a first line `name:`), else one host per line or Ansible INI.
pub fn parse(text: &str) -> Result<Vec<String>, InventoryError> {
    let mut hosts = Hosts::default();
    if looks_like_yaml(text) {
        let docs =
            YamlLoader::load_from_str(text).map_err(|e| InventoryError::Yaml(e.to_string()))?;
        for doc in &docs {
            let Yaml::Hash(groups) = doc else {
                return Err(InventoryError::Shape(kind(doc)));
            };
            for group in groups.values() {
                hosts.group(group)?;
            }
        }
    } else {
        hosts.ini(text);
    }
    Ok(hosts.list)
}

/// Whether the first line that says something opens a YAML document or mapping.
fn looks_like_yaml(text: &str) -> bool {
    let first = text
        .lines()
        .map(str::trim_end)
        .find(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'));
    first.is_some_and(|l| l == "---" || (l.ends_with(':') && !l.starts_with('[')))
}

/// The hosts found so far, each once.
#[derive(Default)]
struct Hosts {
    list: Vec<String>,
    seen: HashSet<String>,
}

impl Hosts {
    fn add(&mut self, name: &str) {
        // A set beside the list: a range may name 100,000 hosts.
        for h in expand_range(name) {
            if self.seen.insert(h.clone()) {
                self.list.push(h);
            }
        }
    }

    /// One host name or id per line; blank lines and `#` or `;` comments skipped. As
    /// Ansible INI: `[group]` headers skipped, as are the lines of `[group:vars]` and
    /// `[group:children]` sections and a host line's variables (`web1 ansible_host=…`).
    fn ini(&mut self, text: &str) {
        let mut in_hosts = true;
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
                continue;
            }
            if let Some(section) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                in_hosts = !section.contains(':');
                continue;
            }
            if let Some(name) = line.split_whitespace().next().filter(|_| in_hosts) {
                self.add(name);
            }
        }
    }

    /// A YAML group: its `hosts:` (names, their variables skipped), then its
    /// `children:` groups; `vars:` skipped. An empty group is `~`.
    fn group(&mut self, group: &Yaml) -> Result<(), InventoryError> {
        let entries = match group {
            Yaml::Hash(h) => h,
            Yaml::Null => return Ok(()),
            other => return Err(InventoryError::Shape(kind(other))),
        };
        for (key, value) in entries {
            match (key.as_str(), value) {
                (_, Yaml::Null) => {}
                (Some("hosts"), Yaml::Hash(hosts)) => {
                    for name in hosts.keys() {
                        self.add(&scalar(name).ok_or(InventoryError::Shape(kind(name)))?);
                    }
                }
                (Some("children"), Yaml::Hash(children)) => {
                    for child in children.values() {
                        self.group(child)?;
                    }
                }
                (Some("hosts" | "children"), other) => {
                    return Err(InventoryError::Shape(kind(other)));
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// A host key as text (`web1`, or a number such as `10`).
fn scalar(y: &Yaml) -> Option<String> {
    match y {
        Yaml::String(s) | Yaml::Real(s) => Some(s.clone()),
        Yaml::Integer(i) => Some(i.to_string()),
        _ => None,
    }
}

/// What a YAML node is, for the error.
fn kind(y: &Yaml) -> &'static str {
    match y {
        Yaml::Array(_) => "a list",
        Yaml::Hash(_) => "a mapping",
        Yaml::Null => "nothing",
        _ => "a single value",
    }
}

/// `web[01:03]` as `web01`, `web02`, `web03` (Ansible's numeric range, its width kept);
/// any other name as itself.
fn expand_range(name: &str) -> Vec<String> {
    let parts = name.split_once('[').and_then(|(head, rest)| {
        let (range, tail) = rest.split_once(']')?;
        let (a, b) = range.split_once(':')?;
        let (lo, hi) = (a.parse::<u64>().ok()?, b.parse::<u64>().ok()?);
        (lo <= hi && hi - lo < 100_000).then_some((head, a.len(), lo, hi, tail))
    });
    match parts {
        Some((head, width, lo, hi, tail)) => (lo..=hi)
            .map(|i| format!("{head}{i:0width$}{tail}"))
            .collect(),
        None => vec![name.to_string()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_lists_and_ansible_ini() {
        let inv = parse(
            "# the fleet\na1 ansible_host=10.0.0.1\n[web]\na[2:3]\nweb[08:10]\n; old\nzz9\n\n\
             [web:vars]\nhttp_port=80\n[all:children]\nweb\n[db]\nb1\nb9\na1\n",
        );
        let want = [
            "a1", "a2", "a3", "web08", "web09", "web10", "zz9", "b1", "b9",
        ];
        assert_eq!(inv.unwrap(), want);
        assert!(parse("# nothing\n\n[web:vars]\nx=1\n").unwrap().is_empty());
    }

    #[test]
    fn ansible_yaml_groups_children_and_ranges() {
        let text = "\
# the fleet
all:
  hosts:
    a1:
      ansible_host: 10.0.0.1
  vars:
    ansible_user: ops
  children:
    web:
      hosts:
        a[2:3]:
        web[08:10]:
    db:
      hosts:
        b1:
        a1:
        10:
    empty:
";
        let want = ["a1", "a2", "a3", "web08", "web09", "web10", "b1", "10"];
        assert_eq!(parse(text).unwrap(), want);
        // `ansible-inventory --list --yaml` writes the same shape after `---`.
        assert_eq!(parse("---\nall:\n  hosts:\n    x:\n").unwrap(), ["x"]);
    }

    #[test]
    fn a_yaml_file_of_another_shape_is_an_error_naming_what_it_found() {
        let e = parse("all:\n  hosts:\n    - web1\n    - web2\n").unwrap_err();
        assert_eq!(e, InventoryError::Shape("a list"));
        assert!(
            e.to_string().contains("`hosts:` and `children:` mappings"),
            "{e}"
        );
        assert!(matches!(
            parse("all:\n  hosts: [\n"),
            Err(InventoryError::Yaml(_))
        ));
    }
}
