//! `smtlab completions SHELL` and `smtlab man`: both generated from the clap definitions,
//! so they cannot fall behind the flags.

use anyhow::{Context, Result};
use clap::CommandFactory;

use crate::args::Cli;

pub fn completion_script(shell: clap_complete::Shell) -> String {
    let mut cmd = Cli::command();
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut cmd, "smtlab", &mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

/// The page of `smtlab` followed by one section per subcommand, as one roff document
/// (`man -l -` shows it all; distributions split pages themselves if they want).
pub fn man_page() -> Result<String> {
    let cmd = Cli::command();
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .render(&mut buf)
        .context("cannot render the manual page")?;
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        let name = format!("smtlab {}", sub.get_name());
        buf.extend_from_slice(format!(".SH \"{}\"\n", name.to_uppercase()).as_bytes());
        let sub = sub.clone().bin_name(name);
        let man = clap_mangen::Man::new(sub);
        let mut part = Vec::new();
        man.render_description_section(&mut part)
            .and_then(|_| man.render_synopsis_section(&mut part))
            .and_then(|_| man.render_options_section(&mut part))
            .context("cannot render the manual page")?;
        // Nested under the subcommand's heading rather than repeating top-level ones.
        let part = String::from_utf8_lossy(&part).replace(".SH ", ".SS ");
        buf.extend_from_slice(part.as_bytes());
    }
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_subcommand_is_completed_in_every_shell() {
        for shell in [
            clap_complete::Shell::Bash,
            clap_complete::Shell::Zsh,
            clap_complete::Shell::Fish,
        ] {
            let s = completion_script(shell);
            for sub in Cli::command().get_subcommands() {
                assert!(s.contains(sub.get_name()), "{shell}: {}", sub.get_name());
            }
            assert!(s.contains("placement"), "{shell}: flags are completed");
        }
    }

    #[test]
    fn the_man_page_is_roff_and_names_every_subcommand() {
        let m = man_page().unwrap();
        assert!(m.starts_with(".ie") || m.starts_with(".TH") || m.contains("\n.TH "));
        assert!(m.contains(".SH NAME"));
        for sub in Cli::command().get_subcommands() {
            if sub.get_name() != "help" {
                let head = format!("SMTLAB {}", sub.get_name().to_uppercase());
                assert!(m.contains(&head), "{head}");
            }
        }
        assert!(m.contains("\\-\\-ci\\-target") || m.contains("ci-target"));
    }
}
