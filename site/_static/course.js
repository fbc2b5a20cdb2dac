// The course's one script on top of the book theme.
//
// The pinned themes (pydata-sphinx-theme 0.20, sphinx-book-theme 1.4) bind each sidebar
// toggle with `document.querySelector`: only the first button of each class gets the
// handler, and in the book theme's layout that one is hidden. So the buttons a reader sees
// (☰ for the chapters, the contents button for this page) did nothing. Each of them hands
// its click to the bound button, which opens the sidebar as a dialog on a phone and folds
// the chapter list away on a desktop.
document.addEventListener("DOMContentLoaded", () => {
  for (const kind of ["primary-toggle", "secondary-toggle"]) {
    const [bound, ...others] = document.querySelectorAll(`.${kind}`);
    for (const button of others) {
      button.addEventListener("click", (event) => {
        event.preventDefault();
        event.stopPropagation();
        bound.click();
      });
    }
  }
});
