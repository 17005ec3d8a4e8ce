/** `release` wrapped so that only its first call does anything (a hold given back twice counts once). */
export function once(release: () => void): () => void {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    release();
  };
}
