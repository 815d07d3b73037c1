/** How fleetgate reaches its own listener: the origin the Batch API's jobs send their requests to. */

/**
 * The origin (`http://host:port`, no trailing slash) at which this host reaches a listener bound to
 * `host`: a wildcard address (`0.0.0.0`, `::`, empty) through loopback, an IPv6 address in brackets.
 */
export function loopbackOrigin(host: string, port: number): string {
  const bare = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  if (bare === '0.0.0.0' || bare === '') return `http://127.0.0.1:${port}`;
  if (bare === '::') return `http://[::1]:${port}`;
  return `http://${bare.includes(':') ? `[${bare}]` : bare}:${port}`;
}
