// Start the real gcite chat service for the tests: tests/support/miniprogram_service.py
// under the project's venv python (GCITE_PYTHON, else <repo>/.venv/bin/python),
// which serves the app with uvicorn on a free loopback port, with a scripted
// OpenAI stand-in as its LLM. Its stdout lines are JSON: the first has the URL,
// then one {"turn": ...} per answer the stand-in gave.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');

const REPO = path.resolve(__dirname, '..', '..', '..', '..');

function pythonPath() {
  return process.env.GCITE_PYTHON || path.join(REPO, '.venv', 'bin', 'python');
}

/** Why the service cannot start here, or null. */
function unavailable() {
  const py = pythonPath();
  if (!fs.existsSync(py)) return 'no Python venv at ' + py + ' (run `make setup`)';
  return null;
}

/**
 * @returns {Promise<{url: string, turns: Array<object>, lastTurn: Function, stop: Function}>}
 */
function startService() {
  return new Promise(function (resolve, reject) {
    const child = spawn(pythonPath(), ['-m', 'support.miniprogram_service'], {
      cwd: path.join(REPO, 'tests'),
      stdio: ['pipe', 'pipe', 'pipe'],
      env: Object.assign({}, process.env, { PYTHONUNBUFFERED: '1' }),
    });
    const turns = [];
    let stderr = '';
    let buf = '';
    let ready = false;
    const timer = setTimeout(function () {
      if (!ready) {
        child.kill('SIGTERM');
        reject(new Error('gcite service did not start in 240 s:\n' + stderr.slice(-2000)));
      }
    }, 240000);
    child.stderr.on('data', function (d) { stderr += d.toString(); });
    child.stdout.on('data', function (d) {
      buf += d.toString();
      let at;
      while ((at = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, at);
        buf = buf.slice(at + 1);
        let obj;
        try { obj = JSON.parse(line); } catch (e) { continue; }
        if (obj.turn) turns.push(obj.turn);
        else if (obj.url && !ready) {
          ready = true;
          clearTimeout(timer);
          resolve({
            url: obj.url,
            keys: obj.keys,
            turns: turns,
            lastTurn: function (query) {
              for (let k = turns.length - 1; k >= 0; k--) if (turns[k].query === query) return turns[k];
              throw new Error('the model was never asked ' + query);
            },
            stop: function () {
              return new Promise(function (done) {
                if (child.exitCode !== null) return done();
                child.once('exit', function () { done(); });
                child.stdin.end();
                setTimeout(function () { if (child.exitCode === null) child.kill('SIGKILL'); }, 15000).unref();
              });
            },
          });
        }
      }
    });
    child.on('exit', function (code) {
      if (!ready) {
        clearTimeout(timer);
        reject(new Error('gcite service exited with ' + code + ':\n' + stderr.slice(-2000)));
      }
    });
  });
}

module.exports = { startService, unavailable, REPO };
