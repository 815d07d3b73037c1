// markdownlint has no rule for a code fence that is never closed: CommonMark lets such a block run
// to the end of the file, so everything after it renders as code and no built-in rule complains.
// micromark marks each fence of a fenced block with a `codeFencedFence` token; a block with only
// its opening fence was never closed.

export default {
  names: ["FG001", "unclosed-code-fence"],
  description: "Code fence is never closed",
  tags: ["code", "fences"],
  parser: "micromark",
  function: (params, onError) => {
    for (const token of params.parsers.micromark.tokens) {
      if (token.type !== "codeFenced") continue;
      const fences = token.children.filter((child) => child.type === "codeFencedFence");
      if (fences.length < 2) {
        onError({ lineNumber: token.startLine, detail: "the block runs to the end of the file" });
      }
    }
  },
};
