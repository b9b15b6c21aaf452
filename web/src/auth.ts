// The gateway's API key, for a gateway that asks for one (PERDURE_API_KEYS or keys in its
// store). It is kept in this browser's localStorage for the page's origin, so a reload keeps
// it, until "Forget API key". An open gateway ignores a key it is sent.
const STORAGE_KEY = 'perdure.apiKey';
/** Announced on `window` when the gateway answers 401: the page then asks for a key. */
export const UNAUTHORIZED_EVENT = 'perdure:unauthorized';

export function storedKey(): string | null {
  try {
    return localStorage.getItem(STORAGE_KEY);
  } catch {
    return null; // Storage turned off: the page works with an open gateway only.
  }
}

export function rememberKey(key: string): void {
  localStorage.setItem(STORAGE_KEY, key);
}

export function forgetKey(): void {
  localStorage.removeItem(STORAGE_KEY);
}

/** `fetch` with the stored key, for the REST calls and the AI SDK's transport alike. */
export const authorizedFetch: typeof fetch = async (input, init) => {
  const headers = new Headers(init?.headers);
  const key = storedKey();
  if (key) headers.set('authorization', `Bearer ${key}`);
  const response = await fetch(input, { ...init, headers });
  if (response.status === 401) dispatchEvent(new Event(UNAUTHORIZED_EVENT));
  return response;
};
