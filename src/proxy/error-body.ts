/** OpenAI-style error body, the form SGLang and OpenAI clients already parse. */
export function errorBody(message: string, type: string, code: number): string {
  return JSON.stringify({ error: { message, type, code } });
}
