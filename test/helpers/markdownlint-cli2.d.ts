// markdownlint-cli2 ships no type declarations: the part of its API test/unit/markdown-lint.test.ts calls.
declare module 'markdownlint-cli2' {
  export function main(params: {
    directory?: string;
    argv?: string[];
    nonFileContents?: Record<string, string>;
    noGlobs?: boolean;
    logMessage?: (message: string) => void;
    logError?: (message: string) => void;
  }): Promise<number>;
}
