// The rig's processes talk to loopback only. This refuses, and reports on
// stderr with the marker the Go side looks for, any name lookup and any
// outbound connection to an address that is not loopback, whichever
// library attempts it.
import dns from 'node:dns';
import net from 'node:net';

export const MARKER = 'peers: refused outbound';

function refuse(what) {
  const msg = `${MARKER} ${what}`;
  process.stderr.write(msg + '\n');
  return new Error(msg);
}

function loopback(host) {
  if (typeof host !== 'string') return false;
  const h = host.replace(/^\[|\]$/g, '');
  return h === 'localhost' || h === '::1' || /^127\./.test(h);
}

export function install() {
  const lookup = dns.lookup;
  dns.lookup = function guardedLookup(hostname, options, callback) {
    if (!loopback(hostname)) {
      const cb = typeof options === 'function' ? options : callback;
      process.nextTick(cb, refuse(`lookup of ${hostname}`));
      return {};
    }
    return lookup.call(this, hostname, options, callback);
  };
  dns.promises.lookup = async (hostname) => {
    throw refuse(`lookup of ${hostname}`);
  };
  const connect = net.Socket.prototype.connect;
  net.Socket.prototype.connect = function guardedConnect(...args) {
    // Node's own callers pass [options, callback] as one array.
    const first = Array.isArray(args[0]) ? args[0][0] : args[0];
    const opts = typeof first === 'object' && first !== null ? first : { port: first, host: args[1] };
    const host = opts.host ?? 'localhost';
    if (opts.path === undefined && !loopback(host)) {
      throw refuse(`connection to ${host}:${opts.port}`);
    }
    return connect.apply(this, args);
  };
}

// PROBE_HOST and PROBE_ADDR are what probe tries to reach; the Go side
// ignores the refusals of these two. Neither leaves the machine even
// unguarded: .invalid never resolves (RFC 6761) and 0.0.0.0/8 is not
// routable.
export const PROBE_HOST = 'peers-probe.invalid';
export const PROBE_ADDR = '0.0.0.1';

// probe says whether the guard is in place: a lookup and a connection,
// both beyond loopback, are refused by it.
export async function probe() {
  const looked = await new Promise((resolve) => {
    dns.lookup(PROBE_HOST, (err) => resolve(String(err?.message ?? '').startsWith(MARKER)));
  });
  let connected = false;
  try {
    net.connect({ host: PROBE_ADDR, port: 9 }).on('error', () => {}).destroy();
  } catch (err) {
    connected = String(err?.message ?? '').startsWith(MARKER);
  }
  return looked && connected;
}
