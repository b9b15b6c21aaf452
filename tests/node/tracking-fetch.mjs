// A `fetch` for DefaultChatTransport that records requests, re-frames SSE
// responses event by event (tracking the `id:` of every event handed to the
// client) and can cut a stream the way a network failure would.
const encoder = new TextEncoder();

/** One SSE response as seen by the client. */
export class SseConnection {
  #reader;
  #abortController;
  #decoder = new TextDecoder();
  #buffer = '';
  #pending = []; // complete raw events not yet handed to the client
  #ended = false;
  #paused = false;
  #failed = false;
  #wake = null;
  #controller;

  constructor({ request, response, abortController, onEventId }) {
    this.request = request;
    this.status = response.status;
    this.headers = response.headers;
    this.events = []; // delivered events: { id, data }
    this.chunks = []; // delivered JSON chunks
    this.text = ''; // concatenated text-delta deltas delivered
    this.sawDone = false;
    this.lastEventId = undefined;
    this.#reader = response.body.getReader();
    this.#abortController = abortController;
    this.onEventId = onEventId;
    this.stream = new ReadableStream(
      {
        start: controller => {
          this.#controller = controller;
        },
        pull: controller => this.#pull(controller),
        cancel: reason => {
          this.#reader.cancel(reason).catch(() => {});
          this.#abortController.abort();
        },
      },
      { highWaterMark: 0 },
    );
  }

  /** Text of the delivered events, e.g. to know what the client has seen. */
  get deliveredText() {
    return this.text;
  }

  /** Stop handing events to the client (the server keeps sending). */
  pause() {
    this.#paused = true;
  }

  /**
   * Cut the connection: the real request is aborted (the server sees a
   * disconnect) and the client's body stream errors with `error`. The default
   * mimics a browser network failure, which AbstractChat classifies as a
   * disconnect (TypeError whose message mentions "network" or "fetch").
   */
  fail(error = new TypeError('network error')) {
    if (this.#failed) return;
    this.#failed = true;
    try {
      this.#controller.error(error);
    } catch {
      // already closed
    }
    this.#reader.cancel(error).catch(() => {});
    this.#abortController.abort(error);
    this.#wake?.();
  }

  async #pull(controller) {
    for (;;) {
      if (this.#failed) return;
      if (this.#paused) {
        await new Promise(resolve => (this.#wake = resolve));
        continue;
      }
      if (this.#pending.length > 0) {
        const raw = this.#pending.shift();
        this.#record(raw);
        controller.enqueue(encoder.encode(raw));
        return;
      }
      if (this.#ended) {
        controller.close();
        return;
      }
      let result;
      try {
        result = await this.#reader.read();
      } catch (error) {
        if (!this.#failed) controller.error(error);
        return;
      }
      if (this.#failed) return;
      if (result.done) {
        this.#buffer += this.#decoder.decode();
        if (this.#buffer.length > 0) this.#pending.push(this.#buffer);
        this.#buffer = '';
        this.#ended = true;
        continue;
      }
      this.#split(this.#decoder.decode(result.value, { stream: true }));
    }
  }

  #split(text) {
    this.#buffer += text;
    // Normalise CRLF / CR line ends, keeping a trailing CR that may start a CRLF.
    const keepCr = this.#buffer.endsWith('\r');
    let body = keepCr ? this.#buffer.slice(0, -1) : this.#buffer;
    body = body.replace(/\r\n?/g, '\n');
    let index;
    while ((index = body.indexOf('\n\n')) !== -1) {
      this.#pending.push(body.slice(0, index + 2));
      body = body.slice(index + 2);
    }
    this.#buffer = keepCr ? `${body}\r` : body;
  }

  #record(raw) {
    let id;
    const data = [];
    for (const line of raw.split('\n')) {
      if (line === '' || line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon === -1 ? line : line.slice(0, colon);
      let value = colon === -1 ? '' : line.slice(colon + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'id' && !value.includes('\0')) id = value;
      else if (field === 'data') data.push(value);
    }
    if (id !== undefined) {
      this.lastEventId = id;
      this.onEventId?.(id);
    }
    if (data.length === 0) return;
    const payload = data.join('\n');
    this.events.push({ id, data: payload });
    if (payload === '[DONE]') {
      this.sawDone = true;
      return;
    }
    try {
      const chunk = JSON.parse(payload);
      this.chunks.push(chunk);
      if (chunk.type === 'text-delta') this.text += chunk.delta;
    } catch {
      // not JSON: the client will reject it, nothing to track
    }
  }
}

/**
 * Returns a tracker whose `.fetch` can be passed to DefaultChatTransport.
 * `tracker.lastEventId` is the id of the last SSE event handed to the client,
 * across all connections (as an EventSource would keep it).
 */
export function createTrackingFetch({ fetchImpl = globalThis.fetch } = {}) {
  const tracker = {
    lastEventId: undefined,
    requests: [], // { method, url, headers: Headers }
    connections: [], // SseConnection, in order
    get current() {
      return this.connections.at(-1);
    },
    fetch: async (input, init = {}) => {
      const request = {
        method: (init.method ?? 'GET').toUpperCase(),
        url: String(input),
        headers: new Headers(init.headers),
      };
      tracker.requests.push(request);

      // Our own controller, so we can cut the connection ourselves; the
      // client's signal (chat.stop()) is forwarded to it.
      const abortController = new AbortController();
      const outer = init.signal;
      if (outer?.aborted) abortController.abort(outer.reason);
      else outer?.addEventListener('abort', () => abortController.abort(outer.reason), { once: true });

      const response = await fetchImpl(input, { ...init, signal: abortController.signal });
      request.status = response.status;
      const contentType = response.headers.get('content-type') ?? '';
      if (!response.ok || !response.body || !contentType.includes('text/event-stream')) {
        return response;
      }
      const connection = new SseConnection({
        request,
        response,
        abortController,
        onEventId: id => {
          tracker.lastEventId = id;
        },
      });
      tracker.connections.push(connection);
      return new Response(connection.stream, {
        status: response.status,
        statusText: response.statusText,
        headers: response.headers,
      });
    },
  };
  return tracker;
}
