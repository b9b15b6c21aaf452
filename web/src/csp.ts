// Zod (the AI SDK validates every stream chunk with it) probes whether it may compile
// validators with `new Function`; under the page's Content-Security-Policy that probe is a
// reported violation. Jitless mode skips it. Imported first, before any schema is used.
import { config } from 'zod/v4/core';

config({ jitless: true });
