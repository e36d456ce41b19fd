//! Just enough of a Dockerfile parser to check what an image build would
//! copy and run, without a container engine: instructions with their line
//! continuations joined and comments dropped, stages, COPY sources, the
//! exec-form ENTRYPOINT and ENV.

use anyhow::{Result, bail};

/// One instruction: its keyword (upper case) and the rest of its text, with
/// line continuations joined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instruction {
    /// `FROM`, `COPY`, `RUN`, ...
    pub keyword: String,
    /// Everything after the keyword, continuations joined by a space.
    pub args: String,
    /// The 1-based line the instruction starts on.
    pub line: usize,
}

/// A `COPY` or `ADD`: its flags and sources (the last word, the
/// destination, is left out).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Copy {
    /// `--from=<stage or image>`, when copying from another stage.
    pub from: Option<String>,
    /// The sources, relative to the build context unless `from` is set.
    pub sources: Vec<String>,
    /// The destination.
    pub dest: String,
    /// The line of the instruction.
    pub line: usize,
}

/// A build stage: its `FROM` image, its name and its instructions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stage {
    /// The base image, as written (`rust:1.95.0-slim-bookworm`).
    pub image: String,
    /// The `AS` name, if any.
    pub name: Option<String>,
    /// The instructions after the `FROM`, up to the next `FROM`.
    pub instructions: Vec<Instruction>,
}

/// A parsed Dockerfile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dockerfile {
    /// The stages, in order; the last one is the image.
    pub stages: Vec<Stage>,
}

/// Splits a Dockerfile into instructions. Comment lines (also inside a
/// continued instruction, as Docker does) and blank lines are dropped; the
/// escape character is the default backslash.
pub fn instructions(text: &str) -> Vec<Instruction> {
    let mut out = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (index, raw) in text.lines().enumerate() {
        let trimmed = raw.trim();
        if trimmed.starts_with('#') || (trimmed.is_empty() && current.is_none()) {
            continue;
        }
        let (content, continues) = match trimmed.strip_suffix('\\') {
            Some(stripped) => (stripped.trim_end(), true),
            None => (trimmed, false),
        };
        let (line, mut joined) = current.take().unwrap_or((index + 1, String::new()));
        if !joined.is_empty() && !content.is_empty() {
            joined.push(' ');
        }
        joined.push_str(content);
        if continues {
            current = Some((line, joined));
        } else if !joined.is_empty() {
            let (keyword, args) = joined
                .split_once(char::is_whitespace)
                .unwrap_or((&joined, ""));
            out.push(Instruction {
                keyword: keyword.to_ascii_uppercase(),
                args: args.trim().to_owned(),
                line,
            });
        }
    }
    if let Some((line, joined)) = current {
        let (keyword, args) = joined
            .split_once(char::is_whitespace)
            .unwrap_or((&joined, ""));
        out.push(Instruction {
            keyword: keyword.to_ascii_uppercase(),
            args: args.trim().to_owned(),
            line,
        });
    }
    out
}

/// Parses a Dockerfile into stages. Fails on instructions before the first
/// `FROM` other than `ARG`.
pub fn parse(text: &str) -> Result<Dockerfile> {
    let mut stages: Vec<Stage> = Vec::new();
    for instruction in instructions(text) {
        if instruction.keyword == "FROM" {
            let words: Vec<&str> = instruction
                .args
                .split_whitespace()
                .filter(|w| !w.starts_with("--"))
                .collect();
            let (image, name) = match words.as_slice() {
                [image] => (*image, None),
                [image, as_, name] if as_.eq_ignore_ascii_case("as") => {
                    (*image, Some((*name).to_owned()))
                }
                _ => bail!(
                    "line {}: cannot read FROM {:?}",
                    instruction.line,
                    instruction.args
                ),
            };
            stages.push(Stage {
                image: image.to_owned(),
                name,
                instructions: Vec::new(),
            });
        } else if let Some(stage) = stages.last_mut() {
            stage.instructions.push(instruction);
        } else if instruction.keyword != "ARG" {
            bail!(
                "line {}: {} before the first FROM",
                instruction.line,
                instruction.keyword
            );
        }
    }
    if stages.is_empty() {
        bail!("no FROM instruction");
    }
    Ok(Dockerfile { stages })
}

/// Splits an instruction's arguments into words: the JSON (exec) form
/// `["a", "b"]` or whitespace-separated words.
pub fn words(args: &str) -> Result<Vec<String>> {
    let trimmed = args.trim();
    if trimmed.starts_with('[') {
        return Ok(serde_json::from_str(trimmed)?);
    }
    Ok(trimmed.split_whitespace().map(str::to_owned).collect())
}

impl Dockerfile {
    /// Every `COPY` and `ADD` of every stage.
    pub fn copies(&self) -> Result<Vec<Copy>> {
        let mut out = Vec::new();
        for stage in &self.stages {
            for instruction in &stage.instructions {
                if instruction.keyword != "COPY" && instruction.keyword != "ADD" {
                    continue;
                }
                let mut from = None;
                let mut rest = Vec::new();
                for word in words(&instruction.args)? {
                    if let Some(value) = word.strip_prefix("--from=") {
                        from = Some(value.to_owned());
                    } else if !word.starts_with("--") || !rest.is_empty() {
                        rest.push(word);
                    }
                }
                let Some(dest) = rest.pop() else {
                    bail!("line {}: COPY without a destination", instruction.line);
                };
                if rest.is_empty() {
                    bail!("line {}: COPY without a source", instruction.line);
                }
                out.push(Copy {
                    from,
                    sources: rest,
                    dest,
                    line: instruction.line,
                });
            }
        }
        Ok(out)
    }

    /// The final stage: the image that is built.
    pub fn image(&self) -> &Stage {
        self.stages
            .last()
            .expect("parse() refuses a Dockerfile without stages")
    }

    /// The stage named `name` (a `--target`).
    pub fn target(&self, name: &str) -> Option<&Stage> {
        self.stages
            .iter()
            .find(|stage| stage.name.as_deref() == Some(name))
    }

    /// Every `RUN` command of every stage, with its `--mount` flags removed.
    pub fn run_commands(&self) -> Vec<String> {
        self.stages
            .iter()
            .flat_map(|stage| &stage.instructions)
            .filter(|i| i.keyword == "RUN")
            .map(|i| {
                i.args
                    .split_whitespace()
                    .skip_while(|w| w.starts_with("--mount=") || w.starts_with("--network="))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect()
    }
}

impl Stage {
    /// The last value of `keyword` in this stage (e.g. `USER`).
    pub fn last(&self, keyword: &str) -> Option<&Instruction> {
        self.instructions
            .iter()
            .rev()
            .find(|i| i.keyword == keyword)
    }

    /// The `ENV` variables this stage sets (`KEY=value` forms; quotes removed).
    pub fn env(&self) -> Vec<(String, String)> {
        self.instructions
            .iter()
            .filter(|i| i.keyword == "ENV")
            .flat_map(|i| {
                i.args
                    .split_whitespace()
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .filter_map(|pair| {
                pair.split_once('=')
                    .map(|(k, v)| (k.to_owned(), v.trim_matches('"').to_owned()))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"# syntax=docker/dockerfile:1
ARG X=1
FROM rust:1.95.0-slim-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
RUN --mount=type=cache,target=/a \
    # a comment inside a continuation
    cargo build --release --locked -p thing \
    && install target/release/thing /out/thing

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build --chown=65532:65532 /out/thing /usr/local/bin/thing
ENV A=1 \
    B="two"
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/thing", "--flag"]
"#;

    #[test]
    fn joins_continuations_and_drops_comments() {
        let all = instructions(SAMPLE);
        let run = all.iter().find(|i| i.keyword == "RUN").unwrap();
        assert_eq!(run.line, 6);
        assert_eq!(
            run.args,
            "--mount=type=cache,target=/a cargo build --release --locked -p thing && install target/release/thing /out/thing"
        );
    }

    #[test]
    fn reads_stages_copies_and_the_image() {
        let file = parse(SAMPLE).unwrap();
        assert_eq!(file.stages.len(), 2);
        assert_eq!(file.stages[0].image, "rust:1.95.0-slim-bookworm");
        assert_eq!(file.stages[0].name.as_deref(), Some("build"));
        let copies = file.copies().unwrap();
        assert_eq!(copies[0].sources, ["Cargo.toml", "Cargo.lock"]);
        assert_eq!(copies[0].dest, "./");
        assert_eq!(copies[0].from, None);
        assert_eq!(copies[1].from.as_deref(), Some("build"));
        assert_eq!(copies[1].sources, ["/out/thing"]);
        assert_eq!(file.image().last("USER").unwrap().args, "65532:65532");
        assert_eq!(
            words(&file.image().last("ENTRYPOINT").unwrap().args).unwrap(),
            ["/usr/local/bin/thing", "--flag"]
        );
        assert_eq!(
            file.image().env(),
            [("A".into(), "1".into()), ("B".into(), "two".into())]
        );
        assert!(file.run_commands()[0].starts_with("cargo build --release"));
    }

    #[test]
    fn refuses_what_it_cannot_read() {
        assert!(parse("RUN true\n").is_err());
        assert!(parse("# nothing\n").is_err());
        assert!(parse("FROM a b c d\n").is_err());
        assert!(parse("FROM a\nCOPY onlyone\n").unwrap().copies().is_err());
    }
}
