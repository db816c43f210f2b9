"""Images with text from installed packages: image-text pairs for CLIP pretraining and zero-shot tests (§5.1).

    image_set.py    ImageSet: uint8 images with their class keys, English names and captions; concat, resizing
    emoji.py        emoji in five drawing styles (npm emoji-datasource-*, the Noto font), names in 14 languages;
                    one style (twitter) held out for zero-shot tests
    icons.py        the Adwaita icon theme's icons, named by their file names
    digits.py       scikit-learn's bundled 8x8 handwritten digits
    text_images.py  words rendered from Debian fonts (DejaVu), the word known exactly: "read the word"
    charts.py       bar charts (matplotlib) and counted circles drawn here: the tallest bar, how many circles
"""
