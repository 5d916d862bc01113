/**
 * The det REST API as seen from the browser.
 *
 * The master is the Jupyter server itself, so every path is relative to the server's base
 * URL. det routes authenticate det credentials (`Authorization: Bearer <det token>`), not
 * Jupyter's cookie, so the sidebar first needs a det session token. It tries, in order:
 *
 * 1. a token it stored earlier (localStorage, per base URL), checked with `/api/v1/me`;
 * 2. `POST <base>/det-jupyter/session`, a Jupyter-authenticated route that trades the
 *    logged-in Jupyter user for a det session token of the user of the same name (the
 *    "one identity" route; absent on masters that do not have it yet: 404);
 * 3. Jupyter's own credentials on the det route (`/api/v1/me` through ServerConnection), in
 *    case the master accepts them directly;
 * 4. a det login form (`POST /api/v1/auth/login`), shown by the sidebar.
 */

import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

/** Jupyter-authenticated route that returns `{token}` for the Jupyter user. */
export const SESSION_PATH = 'det-jupyter/session';

/** The det session is missing or expired: log in again. */
export class AuthRequired extends Error {}

/** Any other failed request, with the master's one-line message. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string
  ) {
    super(message);
  }
}

type Mode = 'token' | 'jupyter';

export class DetApi {
  constructor(settings: ServerConnection.ISettings = ServerConnection.makeSettings()) {
    this._settings = settings;
    this._storageKey = `det-jupyter:token:${settings.baseUrl}`;
    this._token = window.localStorage.getItem(this._storageKey);
  }

  get baseUrl(): string {
    return this._settings.baseUrl;
  }

  /** The det user the session acts as (from `/api/v1/me` or the login), once connected. */
  get username(): string | null {
    return this._username;
  }

  /** Find working credentials without asking the user; false when a login is needed. */
  async connect(): Promise<boolean> {
    if (this._mode !== null) {
      return true;
    }
    if (this._token !== null && (await this._probe('token'))) {
      return true;
    }
    const token = await this._jupyterSession();
    if (token !== null) {
      this._setToken(token);
      if (await this._probe('token')) {
        return true;
      }
    }
    return this._probe('jupyter');
  }

  /** Log in with a det username and password; throws ApiError on bad credentials. */
  async login(username: string, password: string): Promise<void> {
    const resp = await fetch(this._url('api/v1/auth/login'), {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ username, password }),
      credentials: 'omit'
    });
    const body = await readJson(resp);
    if (!resp.ok) {
      throw new ApiError(resp.status, errorMessage(body, resp));
    }
    this._setToken(String(body.token));
    this._mode = 'token';
    this._username = typeof body.user?.username === 'string' ? body.user.username : username;
  }

  logout(): void {
    this._setToken(null);
    this._mode = null;
    this._username = null;
  }

  /** GET a det route the master may not have yet: `null` for its 404. */
  async getOptional(path: string): Promise<any> {
    try {
      return await this.get(path);
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) {
        return null;
      }
      throw err;
    }
  }

  /** GET a det route; AuthRequired when the session is gone. */
  async get(path: string): Promise<any> {
    if (this._mode === null) {
      throw new AuthRequired('not logged in');
    }
    const resp = await this._fetch(this._mode, path);
    const body = await readJson(resp);
    if (resp.status === 401) {
      this.logout();
      throw new AuthRequired(errorMessage(body, resp));
    }
    if (!resp.ok) {
      throw new ApiError(resp.status, errorMessage(body, resp));
    }
    return body;
  }

  /** POST, PUT, PATCH or DELETE a det route with a JSON body; the reply's JSON. */
  async send(method: string, path: string, body?: unknown): Promise<any> {
    const resp = await this.raw(path, {
      method,
      headers: { 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body)
    });
    return readJson(resp);
  }

  /**
   * A det route's raw response (for streams and downloads); AuthRequired when the session is
   * gone, ApiError (with the master's message) for any other failure.
   */
  async raw(path: string, init: RequestInit = {}): Promise<Response> {
    if (this._mode === null) {
      throw new AuthRequired('not logged in');
    }
    let resp: Response;
    if (this._mode === 'jupyter') {
      resp = await ServerConnection.makeRequest(this._url(path), init, this._settings);
    } else {
      const headers = new Headers(init.headers);
      headers.set('Authorization', `Bearer ${this._token}`);
      resp = await fetch(this._url(path), { ...init, headers, credentials: 'omit', cache: 'no-store' });
    }
    if (resp.status === 401) {
      this.logout();
      throw new AuthRequired(errorMessage(await readJson(resp), resp));
    }
    if (!resp.ok) {
      throw new ApiError(resp.status, errorMessage(await readJson(resp), resp));
    }
    return resp;
  }

  /** A URL of this server (for what is not a det API call: the chart module). */
  url(path: string): string {
    return this._url(path);
  }

  private async _probe(mode: Mode): Promise<boolean> {
    try {
      const resp = await this._fetch(mode, 'api/v1/me');
      if (resp.ok) {
        const body = await readJson(resp);
        this._username = typeof body.user?.username === 'string' ? body.user.username : null;
        this._mode = mode;
        return true;
      }
      if (mode === 'token' && resp.status === 401) {
        this._setToken(null);
      }
    } catch (err) {
      console.warn('det-jupyter: probing the det API failed', err);
    }
    return false;
  }

  private async _jupyterSession(): Promise<string | null> {
    try {
      const resp = await ServerConnection.makeRequest(
        this._url(SESSION_PATH),
        { method: 'POST' },
        this._settings
      );
      if (!resp.ok) {
        return null;
      }
      const body = await readJson(resp);
      return typeof body.token === 'string' ? body.token : null;
    } catch {
      return null;
    }
  }

  private _fetch(mode: Mode, path: string): Promise<Response> {
    if (mode === 'jupyter') {
      return ServerConnection.makeRequest(this._url(path), {}, this._settings);
    }
    return fetch(this._url(path), {
      headers: { Authorization: `Bearer ${this._token}` },
      credentials: 'omit',
      cache: 'no-store'
    });
  }

  private _setToken(token: string | null): void {
    this._token = token;
    if (token === null) {
      window.localStorage.removeItem(this._storageKey);
    } else {
      window.localStorage.setItem(this._storageKey, token);
    }
  }

  private _url(path: string): string {
    return URLExt.join(this._settings.baseUrl, path);
  }

  private _settings: ServerConnection.ISettings;
  private _storageKey: string;
  private _token: string | null;
  private _mode: Mode | null = null;
  private _username: string | null = null;
}

async function readJson(resp: Response): Promise<any> {
  const text = await resp.text();
  if (!text) {
    return {};
  }
  try {
    return JSON.parse(text);
  } catch {
    return { message: text.slice(0, 200) };
  }
}

function errorMessage(body: any, resp: Response): string {
  return (body && (body.message || body.error?.message)) || `HTTP ${resp.status} ${resp.statusText}`;
}
